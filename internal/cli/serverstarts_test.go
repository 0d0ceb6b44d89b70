package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
		// hiding adds a variant w of the same server that hides its sleep
		// tool: the readiness check starts the server for each variant,
		// and each trial takes one start, with its own variant's view.
		hiding bool
	}{{"local", 1, false}, {"local", 3, false}, {"processes", 1, false}, {"local", 2, true}} {
		t.Run(fmt.Sprintf("%s/%d/hiding=%v", c.runner, c.cases, c.hiding), func(t *testing.T) {
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
%strials: 1
limits: {concurrency: 1}
`, marker, server, hidingVariant(c.hiding))), 0o644)
			args := []string{"run", filepath.Join(dir, "eval.yaml"), "--results", filepath.Join(dir, "r"), "--runner", c.runner}
			if c.runner == "processes" {
				args = append(args, "--runner-option", "dir="+filepath.Join(dir, "shards"))
			}
			var out, errb bytes.Buffer
			if code := cli.Main(t.Context(), args, cli.Stdio{Out: &out, Err: &errb, Env: os.Environ()}); code != 0 {
				t.Fatalf("mst run exited %d\n%s", code, errb.String())
			}
			trials := c.cases
			if c.hiding {
				trials *= 2
			}
			b, _ := os.ReadFile(marker)
			if n := strings.Count(string(b), "started"); n != trials {
				t.Errorf("%d one-trial runs started the server %d times, want %d (the readiness check's server is the first trial's)", trials, n, trials)
			}
			// Each trial saw its own variant's tools, whichever start it got.
			files, _ := filepath.Glob(filepath.Join(dir, "r", "*", "runs", "*", "transcripts", "*", "*.json"))
			if len(files) != trials {
				t.Fatalf("%d transcripts, want %d", len(files), trials)
			}
			for _, f := range files {
				var tr struct {
					Variant string `json:"variant"`
					Servers []struct {
						Tools []string `json:"tools"`
					} `json:"servers"`
				}
				data, _ := os.ReadFile(f)
				if err := json.Unmarshal(data, &tr); err != nil || len(tr.Servers) != 1 {
					t.Fatalf("%s: %v", f, err)
				}
				if has := slices.Contains(tr.Servers[0].Tools, "sleep"); has != (tr.Variant == "v") || !slices.Contains(tr.Servers[0].Tools, "echo") {
					t.Errorf("variant %s was offered %v; want echo, and sleep only in v", tr.Variant, tr.Servers[0].Tools)
				}
			}
		})
	}
}

func hidingVariant(on bool) string {
	if !on {
		return ""
	}
	return "  w: {model: offline, tools: {test: {sleep: {hidden: true}}}}\n"
}
