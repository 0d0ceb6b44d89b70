package run_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// testVersion is the version the mst binary of these tests is built with,
// checked at every worker's hello.
const testVersion = "0.0.0-runtest"

// Programs built once for the test binary by TestMain.
var (
	// testServer is internal/testkit/testserver as a program of its own.
	testServer string
	// weatherServer is the quickstart's weather server.
	weatherServer string
	// mstCommand runs mst, for the processes runner's workers.
	mstCommand string
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mst-run-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testServer = filepath.Join(dir, "bin", "mcp-testserver")
	weatherServer = filepath.Join(dir, "bin", "weather")
	mstCommand = filepath.Join(dir, "bin", "mst")
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+string(filepath.Separator),
		"-ldflags", "-X github.com/mst-eval/mst/internal/cli.Version="+testVersion,
		"github.com/mst-eval/mst/cmd/mst",
		"github.com/mst-eval/mst/internal/testkit/testserver/cmd/mcp-testserver",
		"github.com/mst-eval/mst/examples/quickstart/weather")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test programs: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
