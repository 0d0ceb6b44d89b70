// Package datasetpython_test runs MST's conformance suites against the
// program plugin mst-plugin-acmesql, started the way mst starts it: found
// on a search path by plugin.FindPrograms and spoken to over stdio.
package datasetpython_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/dataset/datasettest"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/grade/gradertest"
	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/plugin"
)

// needPython skips without python3, except under CI, where it fails.
func needPython(t *testing.T) {
	t.Helper()
	testneed.Program(t, "python3", "the example program plugin needs it (apt-get install python3)")
}

// start finds and starts the plugin in this folder and returns it as a
// Plugin; it stops when the test ends.
func start(t *testing.T) plugin.Plugin {
	t.Helper()
	needPython(t)
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	found, _ := plugin.FindPrograms(dir)
	if len(found) != 1 || found[0].Namespace != "acmesql" {
		t.Fatalf("FindPrograms(%s) = %v, want the program of namespace acmesql (is mst-plugin-acmesql executable?)", dir, found)
	}
	prog := found[0]
	t.Cleanup(func() { prog.Close() })
	p, err := prog.Plugin(t.Context())
	if err != nil {
		t.Fatalf("starting %s: %v", prog.Path, err)
	}
	return p
}

// sourceNamed returns a copy of p's source name under its full name, as
// MST registers it.
func sourceNamed(t *testing.T, p plugin.Plugin, name string) *dataset.SourceDefinition {
	t.Helper()
	for _, d := range p.DatasetSources {
		if d.Name == name {
			full := *d
			full.Name = plugin.FullName(p.Namespace, plugin.KindDataset, name)
			return &full
		}
	}
	t.Fatalf("plugin %s has no dataset source %s", p.Namespace, name)
	return nil
}

// graderNamed is sourceNamed for graders.
func graderNamed(t *testing.T, p plugin.Plugin, name string) *grade.Definition {
	t.Helper()
	for _, d := range p.Graders {
		if d.Name == name {
			full := *d
			full.Name = plugin.FullName(p.Namespace, plugin.KindGrader, name)
			return &full
		}
	}
	t.Fatalf("plugin %s has no grader %s", p.Namespace, name)
	return nil
}

func TestSQLiteSource(t *testing.T) {
	t.Parallel()
	p := start(t)
	dir := t.TempDir()
	if out, err := exec.CommandContext(t.Context(), "python3", "make_db.py", filepath.Join(dir, "cases.db")).CombinedOutput(); err != nil {
		t.Fatalf("python3 make_db.py: %v\n%s", err, out)
	}
	opts := func(s string) json.RawMessage { return json.RawMessage(s) }
	def := sourceNamed(t, p, "sqlite")
	t.Run("all", func(t *testing.T) {
		datasettest.Run(t, def, datasettest.Fixture{
			Options: opts(`{"file": "cases.db"}`),
			Dir:     dir,
			IDs:     []string{"oslo", "tokyo", "lima"},
			Bad: []json.RawMessage{
				opts(`{"file": "missing.db"}`),
				opts(`{"file": "cases.db", "table": "nope"}`),
				opts(`{"file": "cases.db", "where": "1=1"}`),
			},
		})
	})
	t.Run("tag", func(t *testing.T) {
		datasettest.Run(t, def, datasettest.Fixture{
			Options: opts(`{"file": "cases.db", "tag": "smoke"}`),
			Dir:     dir,
			IDs:     []string{"oslo", "tokyo"},
		})
	})
}

func TestContainsAllGrader(t *testing.T) {
	t.Parallel()
	p := start(t)
	opts := func(s string) json.RawMessage { return json.RawMessage(s) }
	gradertest.Run(t, graderNamed(t, p, "contains-all"), []gradertest.Case{
		{Name: "all words", Options: opts(`{"words": ["oslo", "RAIN"]}`), Transcript: gradertest.Answered("Oslo: rain"), Pass: true},
		{Name: "unicode", Options: opts(`{"words": ["東京"]}`), Transcript: gradertest.Answered("東京は雨"), Pass: true},
		{Name: "a word missing", Options: opts(`{"words": ["Oslo", "sun"]}`), Transcript: gradertest.Answered("Oslo: rain"), Pass: false},
	})
}

// TestUnknownMethod checks the protocol's error for a method the plugin
// does not know, by talking to the program directly.
func TestUnknownMethod(t *testing.T) {
	t.Parallel()
	needPython(t)
	cmd := exec.CommandContext(t.Context(), "./mst-plugin-acmesql")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"acme/nope","params":{}}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mst-plugin-acmesql: %v", err)
	}
	var resp struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.ID != 7 || resp.Error.Code != -32601 {
		t.Errorf("response to an unknown method = %s (%v), want id 7 and error -32601", out, err)
	}
}
