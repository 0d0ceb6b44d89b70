package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/mstcmd"
)

func TestMain(m *testing.M) {
	if os.Getenv(testBrowserEnv) == "1" {
		os.Exit(testBrowser())
	}
	testscript.Main(m, map[string]func(){
		// The scripts run the command as the binary does, its signal
		// handling included.
		"mst":            func() { mstcmd.Main() },
		"mcp-testserver": func() { os.Exit(testserver.Main()) },
	})
}

// TestScripts runs the CLI scripts in testdata/script: each is a txtar
// archive of files and commands, run in a fresh folder.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			// The JUnit schema report_formats.txtar validates against.
			xsd, err := filepath.Abs(filepath.Join("..", "engine", "report", "testdata", "junit", "junit.xsd"))
			if err != nil {
				return err
			}
			env.Setenv("JUNIT_XSD", xsd)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfiles": waitFiles,
		},
	})
}
