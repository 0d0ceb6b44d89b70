package run_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// oddCaseIDs are case ids a dataset may hold that do not make file names
// as they are: long, Unicode, control characters, path-like, names
// Windows keeps, and ids that differ only in case.
var oddCaseIDs = []string{
	strings.Repeat("x", 240), strings.Repeat("東", 26), strings.Repeat("天気", 300),
	"\x1b[2J\x1b[H", "tab\there", "../x", "a/b", `C:\x`, "CON", "nul.txt",
	"Case", "case", "CASE", ".", "..",
}

// TestExecuteOddCaseIDs runs a dataset of odd case ids through the local
// runner: every trial's transcript is written, and --resume of the run
// finds them all and has nothing left to do.
func TestExecuteOddCaseIDs(t *testing.T) {
	t.Parallel()
	var cases strings.Builder
	for _, id := range oddCaseIDs {
		b, err := json.Marshal(map[string]string{"id": id, "input": "Please echo 'hi'"})
		if err != nil {
			t.Fatal(err)
		}
		cases.Write(append(b, '\n'))
	}
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: odd
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
graders:
  - toolCalled: echo
limits: {concurrency: 2}
`,
		"cases.jsonl": cases.String(),
	})
	p, out, _ := newRun(t, path, nil)
	if out.Run.Collect != transcript.CollectComplete || out.Run.Counts.Planned != len(oddCaseIDs) {
		t.Errorf("Execute = collect %q, counts %+v; want complete, %d trials", out.Run.Collect, out.Run.Counts, len(oddCaseIDs))
	}
	r, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := r.Keys(t.Context())
	if err != nil {
		t.Fatalf("Keys = %v", err)
	}
	got := map[string]bool{}
	for _, k := range ks {
		got[k.Case] = true
	}
	want := map[string]bool{}
	for _, id := range oddCaseIDs {
		want[id] = true
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("cases with a transcript (-want +got):\n%s", diff)
	}
	rp := resumePlan(t, path, reopen(t, out.Store), false)
	if todo := rp.Todo(); len(todo) != 0 {
		t.Errorf("NewPlan(--resume).Todo() = %q, want none", todo)
	}
	if diff := cmp.Diff(p.Keys(), rp.Keys()); diff != "" {
		t.Errorf("NewPlan(--resume).Keys differ from the run's plan (-run +resume):\n%s", diff)
	}
	res, err := run.Execute(t.Context(), rp, options(nil))
	if err != nil {
		t.Fatalf("Execute(--resume) = %v", err)
	}
	if res.Run.Collect != transcript.CollectComplete {
		t.Errorf("Execute(--resume) collect = %q, want complete", res.Run.Collect)
	}
}
