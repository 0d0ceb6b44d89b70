package runner_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	mstrunner "github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"

	"example.com/mst-plugins/runner"
)

// version is stamped into the mst the tests build: runnertest checks that
// every worker reports the coordinator's version.
const version = "0.0.0-subdir-test"

// mst is the path of that mst, built by TestMain.
var mst string

func TestMain(m *testing.M) {
	// The suite starts this test binary again as its MCP server.
	runnertest.Serve()
	dir, err := os.MkdirTemp("", "subdir-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mst = filepath.Join(dir, "mst")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildMST builds MST's own mst, without plugins, once: runnertest's
// coordinator has no plugins, and a worker must run exactly the
// coordinator's (./cmd/mst, with this plugin, would be refused at hello).
// The runner itself runs in the test, not in the worker.
func buildMST(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(mst); err == nil {
		return mst
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", mst,
		"-ldflags=-X github.com/mst-eval/mst/internal/cli.Version="+version, "github.com/mst-eval/mst/cmd/mst")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build github.com/mst-eval/mst/cmd/mst: %v\n%s", err, out)
	}
	return mst
}

func TestConformance(t *testing.T) {
	bin := buildMST(t)
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p mstrunner.Params) (mstrunner.Runner, error) {
			p.MST = []string{bin}
			p.Options["root"] = t.TempDir()
			return runner.Definition().New(t.Context(), p)
		},
		MSTVersion: version,
		Shards:     2,
	})
}

func TestMachine(t *testing.T) {
	t.Parallel()
	runnertest.RunMachine(t, func(t *testing.T) mstrunner.Machine {
		m, err := runner.Machines(t.TempDir(), []string{"mst"}, runnertest.StopGrace)(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}
