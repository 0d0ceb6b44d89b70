package run_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// copyDir copies the folder src into a new temporary folder.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestLoadReportOldRun(t *testing.T) {
	t.Parallel()
	// A run written by an older MST: grades.json without the transcripts'
	// summaries, and no graders.json.
	dir := copyDir(t, filepath.Join("..", "..", "..", "store", "testdata", "oldrun"))
	st, err := store.OpenRunDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cr := newCountingRun(st)
	rep, err := run.LoadReport(t.Context(), cr)
	if err != nil {
		t.Fatalf("LoadReport(oldrun) = %v", err)
	}
	keys := []transcript.Key{{Case: "c1", Variant: "terse", Trial: 1}, {Case: "c2", Variant: "terse", Trial: 1}}
	// Each old grade gets its transcript's summary, once.
	if diff := cmp.Diff(each(keys, 1), cr.counts(appended)); diff != "" {
		t.Errorf("LoadReport(oldrun): grades appended (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(transcript.Counts{Planned: 2, Answered: 1, Errored: 1}, rep.Counts); diff != "" {
		t.Errorf("LoadReport(oldrun).Counts (-want +got):\n%s", diff)
	}
	if len(rep.Variants) != 1 {
		t.Fatalf("LoadReport(oldrun) has variants %+v, want terse alone", rep.Variants)
	}
	v := rep.Variants[0]
	if v.Variant != "terse" || v.Model != "offline" || v.Passed != 1 || v.Graded != 1 || v.Trials != 2 {
		t.Errorf("LoadReport(oldrun) variant %s model %q passed %d of %d graded, %d trials; want terse, offline, 1 of 1, 2 trials", v.Variant, v.Model, v.Passed, v.Graded, v.Trials)
	}
	if rep.Run.ID != "oldrun" || rep.Run.Eval != "weather" {
		t.Errorf("LoadReport(oldrun).Run = %+v, want id oldrun, eval weather", rep.Run)
	}

	second := newCountingRun(st)
	rep2, err := run.LoadReport(t.Context(), second)
	if err != nil {
		t.Fatalf("LoadReport(oldrun) again = %v", err)
	}
	if n := second.counts(appended); len(n) != 0 {
		t.Errorf("a second LoadReport(oldrun) appended grades %v, want none", n)
	}
	if n := second.counts(read); len(n) != 0 {
		t.Errorf("a second LoadReport(oldrun) read transcripts %v, want none", n)
	}
	if diff := cmp.Diff(rep, rep2); diff != "" {
		t.Errorf("LoadReport(oldrun) twice (-first +second):\n%s", diff)
	}
}

// quickstart lays the quickstart out in a temporary folder as the README
// builds it (its eval names ../../bin/weather) and returns its eval.yaml.
func quickstart(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	qs := filepath.Join(root, "examples", "quickstart")
	if err := os.MkdirAll(qs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "quickstart", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(qs, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(weatherServer, filepath.Join(root, "bin", "weather")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(qs, "eval.yaml")
}

func TestQuickstartPassRates(t *testing.T) {
	t.Parallel()
	_, out, cr := newRun(t, quickstart(t), nil)
	// The numbers the README shows: a refactor must not change them.
	want := map[string][3]int{"terse": {15, 42, 42}, "clear": {39, 42, 42}}
	if diff := cmp.Diff(want, passes(out.Report)); diff != "" {
		t.Errorf("Execute(quickstart): passed, graded, trials per variant (-README +got):\n%s", diff)
	}
	// Whole cases pass or fail together, so the intervals allow for the
	// trials of a case being alike (docs/statistics.md).
	wantCI := map[string]string{"terse": "12.4–67.0", "clear": "60.5–99.8"}
	gotCI := map[string]string{}
	for _, v := range out.Report.Variants {
		if v.Interval != nil {
			gotCI[v.Variant] = fmt.Sprintf("%.1f–%.1f", v.Interval.Low*100, v.Interval.High*100)
		}
	}
	if diff := cmp.Diff(wantCI, gotCI); diff != "" {
		t.Errorf("Execute(quickstart): 95%% intervals per variant (-README +got):\n%s", diff)
	}
	if n := len(cr.counts(appended)); n != 84 {
		t.Errorf("Execute(quickstart) graded %d trials, want 84", n)
	}
	// The quickstart's judge (gate: false, on the offline model) scores
	// every trial and decides none: its means are what the README shows.
	wantJudge := map[string]string{"terse": "2.07 [1.24, 2.90] 12/42 0", "clear": "3.50 [2.79, 4.21] 27/42 0"}
	gotJudge := map[string]string{}
	for _, v := range out.Report.Variants {
		for _, j := range v.Judges {
			if j.Mean != nil && j.Interval != nil {
				gotJudge[v.Variant] = fmt.Sprintf("%.2f [%.2f, %.2f] %d/%d %d", *j.Mean, j.Interval.Low, j.Interval.High, j.Passed, j.Scored, j.Errored)
			}
		}
	}
	if diff := cmp.Diff(wantJudge, gotJudge); diff != "" {
		t.Errorf("Execute(quickstart): judge scores per variant (-README +got):\n%s", diff)
	}
}

func TestProcessesRunnerGradesLikeLocal(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	p, local, _ := newRun(t, path, nil)
	_, procs, cr := newRun(t, path, func(o *run.Options) {
		o.Runner = runner.ProcessesDefinition()
		o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: 2, Keep: runner.KeepNever}
	})
	if got := len(procs.Run.Runner.Machines); got != 2 {
		t.Errorf("Execute(processes, shards=2) ran %d machines, want 2: %+v", got, procs.Run.Runner.Machines)
	}
	for _, m := range procs.Run.Runner.Machines {
		if m.Ended != "done" || m.MSTVersion != testVersion {
			t.Errorf("Execute(processes, shards=2): machine %+v, want done with version %s", m, testVersion)
		}
	}
	// The transcripts come back over the protocol: the collector stores
	// each once and needs read none.
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(written)); diff != "" {
		t.Errorf("Execute(processes): transcripts written (-want +got):\n%s", diff)
	}
	if n := cr.counts(read); len(n) != 0 {
		t.Errorf("Execute(processes): transcripts read %v, want none", n)
	}
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(appended)); diff != "" {
		t.Errorf("Execute(processes): grades appended (-want +got):\n%s", diff)
	}

	type verdict struct {
		Graded, Passed bool
		Results        int
		Status, Cause  string
		ToolCalls      int
	}
	verdicts := func(st store.Run) map[transcript.Key]verdict {
		out := map[transcript.Key]verdict{}
		for k, g := range latestGrades(t, st) {
			out[k] = verdict{g.Graded, g.Passed, len(g.Results), g.Trial.Status, g.Trial.Cause, g.Trial.ToolCalls}
		}
		return out
	}
	want := verdicts(local.Store)
	if len(want) != len(p.Keys()) {
		t.Fatalf("the local run has %d grades, want %d", len(want), len(p.Keys()))
	}
	if diff := cmp.Diff(want, verdicts(procs.Store)); diff != "" {
		t.Errorf("grades of processes (shards=2) differ from local (-local +processes):\n%s", diff)
	}
	if diff := cmp.Diff(passes(local.Report), passes(procs.Report)); diff != "" {
		t.Errorf("pass counts of processes (shards=2) differ from local (-local +processes):\n%s", diff)
	}
}

func TestExecuteLongAndUnicodeIDs(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a-very-long-case-id-", 20)
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: ids
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  meteo: {model: offline}
graders:
  - toolCalled: echo
`,
		"cases.jsonl": `{"id": "東京の天気 ☀️", "input": "Please echo 'sunny'", "clientOptions": {"maxActions": 3}}
{"id": "` + long + `", "input": "Please echo 'long'"}
{"id": "../escape", "input": "Please echo 'dots'"}
`,
	})
	p, out, cr := newRun(t, path, nil)
	if diff := cmp.Diff(each(p.Keys(), 1), cr.counts(appended)); diff != "" {
		t.Errorf("Execute(ids): grades appended (-want +got):\n%s", diff)
	}
	keys, err := out.Store.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.Keys(), keys, cmpSortKeys); diff != "" {
		t.Errorf("Execute(ids): stored keys (-plan +stored):\n%s", diff)
	}
	rep, err := run.LoadReport(t.Context(), reopen(t, out.Store))
	if err != nil {
		t.Fatalf("LoadReport(ids) = %v", err)
	}
	var cases []string
	for _, c := range rep.Cases {
		cases = append(cases, c.Case)
	}
	if diff := cmp.Diff([]string{"東京の天気 ☀️", long, "../escape"}, cases, cmpSortStrings); diff != "" {
		t.Errorf("LoadReport(ids) cases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][3]int{"meteo": {3, 3, 3}}, passes(rep)); diff != "" {
		t.Errorf("LoadReport(ids): passed, graded, trials (-want +got):\n%s", diff)
	}
}

// A stored run in a folder mst cannot write to (an archive) is still
// reported: the grades it makes are only not remembered.
func TestLoadReportReadOnlyRun(t *testing.T) {
	t.Parallel()
	// (Tests run as root here, who writes anywhere: the store refuses.)
	dir := copyDir(t, filepath.Join("..", "..", "..", "store", "testdata", "oldrun"))
	st, err := store.OpenRunDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run.LoadReport(t.Context(), refusingGrades{st})
	if err != nil {
		t.Fatalf("LoadReport(a run that refuses new grades) = %v, want its report", err)
	}
	if rep.Counts.Answered != 1 || rep.Counts.Errored != 1 {
		t.Errorf("LoadReport(a run that refuses new grades) counts %+v, want 1 answered and 1 errored", rep.Counts)
	}
}

// refusingGrades is a stored run that cannot take grades.
type refusingGrades struct{ store.Run }

func (refusingGrades) AppendGrades(context.Context, ...grade.TrialGrade) error {
	return errors.New("read-only file system")
}
