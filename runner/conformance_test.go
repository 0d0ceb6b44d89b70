package runner_test

import (
	"os"
	"testing"

	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
)

// testVersion is the MST version the mst binary built for these tests
// reports; the processes runner's workers run that binary.
const testVersion = "0.0.0-runnertest"

// role, when set (by an OS's test file), runs a role this test binary was
// started again for, and exits, when the environment asks for one.
var role func()

func TestMain(m *testing.M) {
	// The suite starts this test binary again as its MCP server.
	runnertest.Serve()
	if role != nil {
		role()
	}
	code := m.Run()
	testbin.Clean()
	os.Exit(code)
}

// mstBinary builds ./cmd/mst once, stamped with testVersion, and returns
// its path.
func mstBinary(t *testing.T) string {
	t.Helper()
	dir, err := testbin.Build(testbin.Options{Version: testVersion}, testbin.MST)
	if err != nil {
		t.Fatal(err)
	}
	return testbin.Path(dir, testbin.MST)
}

func TestLocalConformance(t *testing.T) {
	t.Parallel()
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p runner.Params) (runner.Runner, error) {
			return runner.LocalDefinition().New(t.Context(), p)
		},
		MSTVersion: "0.0.0-local",
		Shards:     1,
	})
}

func TestProcessesConformance(t *testing.T) {
	t.Parallel()
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p runner.Params) (runner.Runner, error) {
			p.MST = []string{mstBinary(t)}
			p.Options["dir"] = t.TempDir()
			return runner.ProcessesDefinition().New(t.Context(), p)
		},
		MSTVersion: testVersion,
		Shards:     3,
	})
}

// TestProcessesMachine checks the processes runner's machine, a folder on
// this machine, against the Machine contract.
func TestProcessesMachine(t *testing.T) {
	t.Parallel()
	runnertest.RunMachine(t, func(t *testing.T) runner.Machine {
		r, err := runner.ProcessesDefinition().New(t.Context(), runner.Params{Options: map[string]string{"dir": t.TempDir()}, MST: []string{"mst"}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := runner.CreateProcessesMachine(t.Context(), r, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}
