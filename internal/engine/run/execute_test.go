package run_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// e2eEval runs on the offline model against the test server: three cases
// it answers by echoing, one that crashes the server (an errored trial),
// under two variants, two trials each. The trials run one at a time: the
// trials of a variant share its server process (the api client runs them
// in one session), so the crash of a boom trial would also error any trial
// of the same variant in flight beside it, and the counts the tests expect
// would depend on the scheduling.
var e2eFiles = map[string]string{
	"eval.yaml": `
name: e2e
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
  w:
    model: offline
    tools:
      test:
        echo: {description: "Repeat text."}
trials: 2
graders:
  - toolCalled: echo
limits: {concurrency: 1}
`,
	"cases.jsonl": `{"id": "a", "input": "Please echo 'a'"}
{"id": "b", "input": "Please echo 'b'", "expect": [{"answerContains": "b"}]}
{"id": "c", "input": "Please echo 'c'", "expect": [{"answerContains": "nowhere"}]}
{"id": "boom", "input": "crash the server process now"}
`,
}

// newRun plans the eval at path and executes it into a new counting
// store under a temporary folder.
func newRun(t *testing.T, path string, edit func(*run.Options)) (*run.Plan, *run.Outcome, *countingRun) {
	t.Helper()
	p, err := run.NewPlan(t.Context(), request(path))
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	st := &countingStore{Store: store.Dir{Root: t.TempDir(), Eval: "weather"}}
	o := options(st)
	if edit != nil {
		edit(&o)
	}
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute(%s) = %v", path, err)
	}
	return p, out, st.only(t)
}

// reopen opens a stored run afresh, counting.
func reopen(t *testing.T, st store.Run) *countingRun {
	t.Helper()
	r, err := store.OpenRunDir(st.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return newCountingRun(r)
}

func keysOf(keys []transcript.Key, keep func(transcript.Key) bool) []transcript.Key {
	return slices.DeleteFunc(slices.Clone(keys), func(k transcript.Key) bool { return !keep(k) })
}

func isBoom(k transcript.Key) bool { return k.Case == "boom" }

// passes returns each variant's passed, graded and trials.
func passes(r report.Report) map[string][3]int {
	out := map[string][3]int{}
	for _, v := range r.Variants {
		out[v.Variant] = [3]int{v.Passed, v.Graded, v.Trials}
	}
	return out
}

func TestExecuteGradesEachTrialOnce(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	p, out, cr := newRun(t, path, nil)
	if got, want := len(p.Keys()), 16; got != want {
		t.Fatalf("NewPlan(4 cases, 2 variants, 2 trials) has %d trials, want %d", got, want)
	}
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(appended)); diff != "" {
		t.Errorf("Execute: grades appended per trial (-want +got):\n%s", diff)
	}
	// The local worker writes into the store; the collector reads each
	// transcript once to grade it, and gathering reads none again.
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(read)); diff != "" {
		t.Errorf("Execute: transcripts read per trial (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(written)); diff != "" {
		t.Errorf("Execute: transcripts written per trial (-want +got):\n%s", diff)
	}
	wantCounts := transcript.Counts{Planned: 16, Answered: 12, Errored: 4}
	if diff := cmp.Diff(wantCounts, out.Run.Counts); diff != "" {
		t.Errorf("Execute: run counts (-want +got):\n%s", diff)
	}
	if out.Run.Collect != transcript.CollectComplete {
		t.Errorf("Execute: collect = %q, want %q", out.Run.Collect, transcript.CollectComplete)
	}
	// a and b pass (the echo holds the letter), c never does (its answer
	// lacks "nowhere"), boom errors and is not graded.
	if diff := cmp.Diff(map[string][3]int{"v": {4, 6, 8}, "w": {4, 6, 8}}, passes(out.Report)); diff != "" {
		t.Errorf("Execute: passed, graded, trials per variant (-want +got):\n%s", diff)
	}

	// The report of the stored run grades nothing and reads nothing.
	again := reopen(t, out.Store)
	rep, err := run.LoadReport(t.Context(), again)
	if err != nil {
		t.Fatalf("LoadReport(%s) = %v", out.Store.Location(), err)
	}
	if n := again.counts(appended); len(n) != 0 {
		t.Errorf("LoadReport of a graded run appended grades %v, want none", n)
	}
	if n := again.counts(read); len(n) != 0 {
		t.Errorf("LoadReport of a graded run read transcripts %v, want none", n)
	}
	if diff := cmp.Diff(out.Report, rep, cmpopts.IgnoreFields(report.VariantStats{}, "Description")); diff != "" {
		t.Errorf("LoadReport(%s) differs from Execute's report (-Execute +LoadReport):\n%s", out.Store.Location(), diff)
	}
}

func TestGatherGradesWhatHasNoGrade(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	// The collector's grades of case b are lost (a failed append): gather
	// grades them, and reads only their transcripts again.
	var dropped []transcript.Key
	p, out, cr := newRun(t, path, func(o *run.Options) {
		st := o.Store.(*countingStore)
		o.Store = &hookStore{countingStore: st, hook: func(r *countingRun) {
			r.drop = func(k transcript.Key) bool {
				if k.Case != "b" || slices.Contains(dropped, k) {
					return false
				}
				dropped = append(dropped, k)
				return true
			}
		}}
	})
	b := keysOf(p.Keys(), func(k transcript.Key) bool { return k.Case == "b" })
	if diff := cmp.Diff(b, dropped, cmpopts.SortSlices(keyLess)); diff != "" {
		t.Fatalf("grades dropped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(appended)); diff != "" {
		t.Errorf("Execute: grades stored per trial (-want +got):\n%s", diff)
	}
	wantReads := each(p.Keys(), 1)
	for _, k := range b {
		wantReads[k] = 2
	}
	if diff := cmp.Diff(wantReads, cr.counts(read)); diff != "" {
		t.Errorf("Execute: transcripts read per trial (-want +got):\n%s", diff)
	}
	if got := len(latestGrades(t, out.Store)); got != len(p.Keys()) {
		t.Errorf("after Execute the store has %d grades, want %d", got, len(p.Keys()))
	}
}

// hookStore is a counting store that calls hook on each run it creates.
type hookStore struct {
	*countingStore
	hook func(*countingRun)
}

func (s *hookStore) Create(ctx context.Context, id string, redact *secrets.Redactor) (store.Run, error) {
	r, err := s.countingStore.Create(ctx, id, redact)
	if err == nil {
		s.hook(r.(*countingRun))
	}
	return r, err
}

func TestLoadReportAfterCrash(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	// Every grade is lost, as when the process dies after the transcripts
	// are stored and before any grade is.
	p, out, _ := newRun(t, path, func(o *run.Options) {
		st := o.Store.(*countingStore)
		o.Store = &hookStore{countingStore: st, hook: func(r *countingRun) {
			r.drop = func(transcript.Key) bool { return true }
		}}
	})
	if got := len(latestGrades(t, out.Store)); got != 0 {
		t.Fatalf("the crashed run has %d grades, want none", got)
	}
	cr := reopen(t, out.Store)
	rep, err := run.LoadReport(t.Context(), cr)
	if err != nil {
		t.Fatalf("LoadReport(%s) = %v", out.Store.Location(), err)
	}
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(appended)); diff != "" {
		t.Errorf("LoadReport of an ungraded run: grades appended (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(read)); diff != "" {
		t.Errorf("LoadReport of an ungraded run: transcripts read (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(passes(out.Report), passes(rep)); diff != "" {
		t.Errorf("LoadReport after a crash: pass counts differ from the run's (-run +LoadReport):\n%s", diff)
	}
	if diff := cmp.Diff(out.Report.Counts, rep.Counts); diff != "" {
		t.Errorf("LoadReport after a crash: counts (-run +LoadReport):\n%s", diff)
	}

	second := reopen(t, out.Store)
	if _, err := run.LoadReport(t.Context(), second); err != nil {
		t.Fatalf("LoadReport(%s) again = %v", out.Store.Location(), err)
	}
	if n := second.counts(appended); len(n) != 0 {
		t.Errorf("a second LoadReport appended grades %v, want none", n)
	}
	if n := second.counts(read); len(n) != 0 {
		t.Errorf("a second LoadReport read transcripts %v, want none", n)
	}
}
