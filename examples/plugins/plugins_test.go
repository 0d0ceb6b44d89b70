// Package plugins_test tests the example plugins. The Go ones are modules
// of their own (each as a plugin's own repository would be), which the
// main module's `go test ./...` does not enter; TestExampleModules runs
// their tests. The program plugin in dataset-python has no module and is
// tested by the main module directly.
package plugins_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mst-eval/mst/internal/testkit/testneed"
)

// goModules are the folders of the example plugins that are Go modules.
var goModules = []string{"grader", "client", "runner"}

// needGo returns the go command, skipping the test when there is none,
// except under CI, where that fails it.
func needGo(t *testing.T) string {
	t.Helper()
	return testneed.Program(t, "go", "the example plugins are built with it (install Go 1.26)")
}

// runGo runs `go args…` in dir with the test's context and fails the test,
// showing the command's output, when it fails. It returns the output.
func runGo(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), needGo(t), args...)
	cmd.Dir = dir
	// The module's own go.mod and go.sum decide, whatever the caller's
	// GOFLAGS say (-mod=mod would rewrite them).
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		abs, _ := filepath.Abs(dir)
		t.Fatalf("go %v in %s: %v\n%s", args, abs, err, out)
	}
	return string(out)
}

// TestExampleModules runs `go test ./...` in each example module.
func TestExampleModules(t *testing.T) {
	t.Parallel()
	for _, dir := range goModules {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			t.Log(runGo(t, dir, "test", "./..."))
		})
	}
}
