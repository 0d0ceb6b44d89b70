package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/cli"
)

// TestServerStartsOnce counts how often a stdio server starts (a wrapper
// marks each start, then runs the test server): the readiness check's
// server is the first trial's, so a run of N one-trial cases starts it N
// times, not N+1; each other trial still gets a fresh server.
func TestServerStartsOnce(t *testing.T) {
	for _, c := range []struct {
		runner string
		cases  int
	}{{"local", 1}, {"local", 3}, {"processes", 1}} {
		t.Run(fmt.Sprintf("%s/%d", c.runner, c.cases), func(t *testing.T) {
			dir := t.TempDir()
			server := testServerCommand(t, dir)
			marker := filepath.Join(dir, "starts")
			var lines strings.Builder
			for i := range c.cases {
				fmt.Fprintf(&lines, `{"id": "c%d", "input": "Please echo 'word %d'"}`+"\n", i, i)
			}
			os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(lines.String()), 0o644)
			os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(fmt.Sprintf(`name: starts
datasets: [cases.jsonl]
servers:
  test:
    command: /bin/sh
    args: ["-c", 'echo started >> "$0"; exec "$1"', %q, %q]
variants:
  v: {model: offline}
trials: 1
limits: {concurrency: 1}
`, marker, server)), 0o644)
			args := []string{"run", filepath.Join(dir, "eval.yaml"), "--results", filepath.Join(dir, "r"), "--runner", c.runner}
			if c.runner == "processes" {
				args = append(args, "--runner-option", "dir="+filepath.Join(dir, "shards"))
			}
			var out, errb bytes.Buffer
			if code := cli.Main(t.Context(), args, cli.Stdio{Out: &out, Err: &errb, Env: os.Environ()}); code != 0 {
				t.Fatalf("mst run exited %d\n%s", code, errb.String())
			}
			b, _ := os.ReadFile(marker)
			if n := strings.Count(string(b), "started"); n != c.cases {
				t.Errorf("%d one-trial cases started the server %d times, want %d (the readiness check's server is the first trial's)", c.cases, n, c.cases)
			}
		})
	}
}
