package run_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

func offlineJudges() *grade.Judges { return &grade.Judges{Providers: builtin.Providers()} }

// TestRegradeKeepsBothSets regrades the quickstart with other graders:
// the run then has two grade sets, the report shows the newest and says
// so, and set 1 still reports what the run reported.
func TestRegradeKeepsBothSets(t *testing.T) {
	t.Parallel()
	_, out, _ := newRun(t, quickstart(t), nil)
	st, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := []json.RawMessage{json.RawMessage(`{"judge": {"rubric": "rightTools", "model": "offline"}}`)}
	got, err := run.Regrade(t.Context(), st, run.RegradeOptions{Graders: specs, GradersFile: "judges.yaml", Judges: offlineJudges()})
	if err != nil {
		t.Fatalf("Regrade = %v", err)
	}
	if got.Set.ID != "2" || got.Graded != 84 {
		t.Errorf("Regrade made set %s with %d grades, want set 2 with 84", got.Set.ID, got.Graded)
	}
	sets, err := st.GradeSets(t.Context())
	if err != nil || len(sets) != 2 || sets[0].ID != "1" || sets[1].ID != "2" || sets[1].GradersFile != "judges.yaml" {
		t.Fatalf("GradeSets = %+v, %v; want sets 1 and 2", sets, err)
	}
	// The newest set is shown by default, and says which it is.
	latest, err := run.LoadReport(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if g := latest.Grades; g == nil || g.ID != "2" || g.Sets != 2 || g.By != "mst grade" {
		t.Errorf("LoadReport shows %+v, want set 2 of 2", g)
	}
	if diff := cmp.Diff(passes(got.Report), passes(latest)); diff != "" {
		t.Errorf("the report of set 2 differs from Regrade's (-Regrade +LoadReport):\n%s", diff)
	}
	// A gating judge on every trial: the pass rates changed, and the
	// judge's scores are of another judge than the run's own.
	if cmp.Equal(passes(out.Report), passes(latest)) {
		t.Errorf("set 2 has the pass rates of set 1: the new graders were not used")
	}
	hash := func(r report.Report) string { return r.Variants[0].Judges[0].Hash }
	if hash(out.Report) == hash(latest) {
		t.Errorf("the two judges share a hash")
	}
	// Set 1 is kept as it was: its report is the run's.
	first, err := run.LoadReportWith(t.Context(), st, run.ReportOptions{GradeSet: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Grades == nil || first.Grades.ID != "1" {
		t.Errorf("--grades 1 shows %+v", first.Grades)
	}
	if diff := cmp.Diff(passes(out.Report), passes(first)); diff != "" {
		t.Errorf("set 1 changed (-run +set 1):\n%s", diff)
	}
	var text strings.Builder
	latest.WriteText(&text)
	if !strings.Contains(text.String(), "Grades: set 2 of 2 (mst grade, ") || !strings.Contains(text.String(), "graders from judges.yaml") {
		t.Errorf("the text report does not say which grade set it shows:\n%s", text.String())
	}
	if _, err := run.LoadReportWith(t.Context(), st, run.ReportOptions{GradeSet: "3"}); err == nil || !strings.Contains(err.Error(), "has no grade set \"3\": its sets are 1, 2") {
		t.Errorf("an unknown set: %v", err)
	}
}

// TestRegradeResumeFinishesASet interrupts a regrade once some grades
// are stored, then finishes the set: every trial ends with one grade.
func TestRegradeResumeFinishesASet(t *testing.T) {
	t.Parallel()
	_, out, _ := newRun(t, quickstart(t), nil)
	st, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := []json.RawMessage{json.RawMessage(`{"maxToolCalls": 1}`)}
	ctx, cancel := context.WithCancel(t.Context())
	p := &cancelAfter{n: 10, cancel: cancel}
	if _, err := run.Regrade(ctx, st, run.RegradeOptions{Graders: specs, Progress: p, Workers: 1}); err == nil || !strings.Contains(err.Error(), "--resume 2") {
		t.Fatalf("an interrupted Regrade = %v, want the command that finishes it", err)
	}
	done, err := run.Regrade(t.Context(), st, run.RegradeOptions{Resume: "2"})
	if err != nil {
		t.Fatalf("Regrade --resume = %v", err)
	}
	if done.Set.ID != "2" || done.Graded == 0 || done.Graded >= 84 {
		t.Errorf("the resume graded %d trials into set %s, want the rest of set 2", done.Graded, done.Set.ID)
	}
	n := 0
	set, _ := st.GradeSet(t.Context(), "2")
	set.Grades(t.Context(), func(g grade.TrialGrade) error { n++; return nil })
	if n != 84 {
		t.Errorf("set 2 holds %d trials' grades, want 84", n)
	}
}

// cancelAfter is a Progress that cancels after n trials.
type cancelAfter struct {
	n      int
	cancel func()
}

func (c *cancelAfter) Start(transcript.Run, int) {}
func (c *cancelAfter) Finish()                   {}
func (c *cancelAfter) Trial(report.Trial) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
}

// TestNoGrade collects the quickstart without grading: no grade is
// stored, the report says the run is not graded (mst report grades
// nothing either), and mst grade gives it its first grade set.
func TestNoGrade(t *testing.T) {
	t.Parallel()
	req := request(quickstart(t))
	req.NoGrade = true
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Execute(t.Context(), p, options(store.Dir{Root: t.TempDir(), Eval: "weather"}))
	if err != nil {
		t.Fatal(err)
	}
	if !out.Run.NoGrade || !out.Report.NotGraded || out.Report.Counts.Answered != 84 || out.Report.Variants[0].Graded != 0 {
		t.Errorf("a --no-grade run: noGrade %t, report notGraded %t, %d answered, %d graded", out.Run.NoGrade, out.Report.NotGraded, out.Report.Counts.Answered, out.Report.Variants[0].Graded)
	}
	st, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run.LoadReport(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.NotGraded || rep.Variants[0].Graded != 0 {
		t.Errorf("mst report of a --no-grade run graded it")
	}
	if _, err := os.Stat(filepath.Join(out.Store.Location(), "grades.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a --no-grade run stored grades (%v)", err)
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "Not graded: the run was collected with --no-grade; grade it with mst grade") {
		t.Errorf("the text report does not say the run is not graded:\n%s", text.String())
	}
	cfgSpecs := []json.RawMessage{json.RawMessage(`{"judge": {"rubric": "supported", "model": "offline", "gate": false}}`)}
	got, err := run.Regrade(t.Context(), st, run.RegradeOptions{Graders: cfgSpecs, Judges: offlineJudges()})
	if err != nil {
		t.Fatal(err)
	}
	if got.Set.ID != "1" || got.Report.NotGraded || got.Report.Variants[0].Graded != 42 {
		t.Errorf("the first mst grade of a --no-grade run: set %s, not graded %t, %d graded", got.Set.ID, got.Report.NotGraded, got.Report.Variants[0].Graded)
	}
}

// TestNoGradeNeedsNoJudgeKey plans a run whose judge reads a key set
// nowhere: refused, naming the variable, unless it collects only.
func TestNoGradeNeedsNoJudgeKey(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: judged
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
graders:
  - judge: {rubric: supported, model: anthropic/claude-judge, apiKeyEnv: MST_TEST_JUDGE_KEY_UNSET}
`,
		"cases.jsonl": `{"id": "a", "input": "hello"}` + "\n",
	})
	_, err := run.NewPlan(t.Context(), request(path))
	if err == nil || !strings.Contains(err.Error(), "judge supported by anthropic/claude-judge reads its key from MST_TEST_JUDGE_KEY_UNSET") {
		t.Errorf("NewPlan with a judge's key set nowhere = %v", err)
	}
	req := request(path)
	req.NoGrade = true
	if _, err := run.NewPlan(t.Context(), req); err != nil {
		t.Errorf("NewPlan --no-grade = %v, want no need of the judge's key", err)
	}
}
