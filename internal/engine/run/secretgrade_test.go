package run_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// TestGradersMatchSecretValues: graders whose expected values hold a
// secrets-file value (in an answer grader of the eval, in a case's
// toolCalled arguments, in a regular expression) pass on a trial that used
// the value, although the stored transcript holds it redacted; a regrade of
// the stored run agrees; and no byte the run stored holds the value.
func TestGradersMatchSecretValues(t *testing.T) {
	t.Parallel()
	const secret = "tok-5ecret-81f3a9"
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: secretgrade
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
graders:
  - answerContains: "` + secret + `"
  - answerMatches: "^echo: (prefix )?` + secret + `( suffix)?$"
`,
		"cases.jsonl": `{"id": "a", "input": "Please echo '` + secret + `'", "expect": [{"toolCalled": {"tool": "echo", "arguments": {"text": "` + secret + `"}}}]}
{"id": "b", "input": "Please echo 'prefix ` + secret + ` suffix'", "expect": [{"toolCalled": {"tool": "echo", "arguments": {"text": "prefix ` + secret + ` suffix"}}}]}
`,
	})
	set := secrets.New()
	if err := set.Add("ECHO_TOKEN", secret); err != nil {
		t.Fatal(err)
	}
	req := request(path)
	req.Secrets = set
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	root := t.TempDir()
	o := options(store.Dir{Root: root, Eval: "weather"})
	o.Secrets, o.Redact = set, secrets.NewRedactor(set)
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute(%s) = %v", path, err)
	}
	grades := latestGrades(t, out.Store)
	if len(grades) != len(p.Keys()) {
		t.Fatalf("Execute stored %d grades, want %d", len(grades), len(p.Keys()))
	}
	for k, g := range grades {
		if !g.Graded || !g.Passed {
			t.Errorf("trial %s: graded %t, passed %t, results %+v; want it passed", k, g.Graded, g.Passed, g.Results)
		}
		for _, r := range g.Results {
			if strings.Contains(r.Grader+r.Detail, secret) {
				t.Errorf("trial %s: result %+v shows the secret", k, r)
			}
		}
	}

	// A report of the stored run, graded again from what was stored,
	// agrees.
	again, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run.LoadReport(t.Context(), again)
	if err != nil {
		t.Fatalf("LoadReport = %v", err)
	}
	if got, want := passes(rep)["v"], [3]int{2, 2, 2}; got != want {
		t.Errorf("LoadReport: passed, graded, trials = %v, want %v", got, want)
	}

	var files int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret value", path)
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walking %s: %d files, %v", root, files, err)
	}
}
