package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

// gradeSetReport builds the report of a run of cases a and b, variant v,
// two trials each, from the grades of one set.
func gradeSetReport(id string, gs []grade.TrialGrade) report.Report {
	in := report.Input{
		Run:      transcript.Run{ID: "r1", Eval: "e", Variants: []string{"v"}, Trials: 2},
		Cases:    []string{"a", "b"},
		GradeSet: &report.GradeSetInfo{ID: id, Sets: 2},
	}
	for _, g := range gs {
		in.Trials = append(in.Trials, report.NewTrial(g))
	}
	return report.Build(in)
}

// tg is the grade of trial c#n of variant v: "pass", "fail", "errored" (a
// judge gave no verdict) or "ungraded" (the trial errored).
func tg(c string, n int, verdict string) grade.TrialGrade {
	g := grade.TrialGrade{Key: transcript.Key{Case: c, Variant: "v", Trial: n}, Trial: grade.Summary{Status: transcript.Answered}}
	switch verdict {
	case "pass":
		g.Graded, g.Passed = true, true
		g.Results = []grade.Result{{Grader: "toolCalled echo", Passed: true}}
	case "fail":
		g.Graded = true
		g.Results = []grade.Result{{Grader: "toolCalled echo", Detail: "not called"}, {Grader: "advisory judge", Advisory: true}}
	case "errored":
		g.Errored = "the judge's model answered 500"
		g.Results = []grade.Result{{Grader: "judge correct", Error: "500"}}
	case "ungraded":
		g.Trial.Status = transcript.Errored
	}
	return g
}

// TestCompareGradeSets compares two sets of grades of the same trials:
// each change of verdict is listed with the graders that failed, pass →
// fail and fail → pass are counted, a trial the set lacks is missing and
// noted, and a trial that was never graded is no change.
func TestCompareGradeSets(t *testing.T) {
	base := []grade.TrialGrade{tg("a", 1, "pass"), tg("a", 2, "pass"), tg("b", 1, "fail"), tg("b", 2, "ungraded")}
	other := []grade.TrialGrade{tg("a", 1, "fail"), tg("a", 2, "errored"), tg("b", 1, "pass"), tg("b", 2, "ungraded")}
	c := report.CompareGradeSets(gradeSetReport("1", base), gradeSetReport("2", other), base, other[:3])
	if c.Kind != report.GradesCompareKind || c.Base.ID != "1" || c.Grades.ID != "2" || len(c.Variants) != 1 {
		t.Fatalf("CompareGradeSets = kind %q, sets %q and %q, %d variants; want mst.compare-grades of sets 1 and 2, one variant", c.Kind, c.Base.ID, c.Grades.ID, len(c.Variants))
	}
	v := c.Variants[0]
	want := []report.TrialChange{
		{Case: "a", Trial: 1, Base: "pass", Grades: "fail", BaseFailing: []string{}, Failing: []string{"toolCalled echo"}},
		{Case: "a", Trial: 2, Base: "pass", Grades: "errored", BaseFailing: []string{}, Failing: []string{"judge correct"}},
		{Case: "b", Trial: 1, Base: "fail", Grades: "pass", BaseFailing: []string{"toolCalled echo"}, Failing: []string{}},
		{Case: "b", Trial: 2, Base: "ungraded", Grades: "missing", BaseFailing: []string{}, Failing: []string{}},
	}
	if diff := cmp.Diff(want, v.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if v.Trials != 4 || v.PassToFail != 1 || v.FailToPass != 1 {
		t.Errorf("trials %d, pass→fail %d, fail→pass %d; want 4, 1, 1", v.Trials, v.PassToFail, v.FailToPass)
	}
	if v.Base.Passed != 2 || v.Base.Graded != 3 || v.Grades.Passed != 1 || v.Grades.Graded != 2 {
		t.Errorf("pass rates: base %+v, grades %+v; want 2/3 and 1/2", v.Base, v.Grades)
	}
	if v.Paired.A != "set 1" || v.Paired.B != "set 2" {
		t.Errorf("paired sides %q and %q, want set 1 and set 2", v.Paired.A, v.Paired.B)
	}
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "set 2 has no grade of 1 trial") || !strings.Contains(c.Notes[0], "--resume 2") {
		t.Errorf("notes = %q, want one that set 2 lacks a grade and how to finish it", c.Notes)
	}
	var buf bytes.Buffer
	if err := c.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"pass → fail", "fail → pass", "pass → errored", "Note: set 2 has no grade"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("the text lacks %q:\n%s", s, buf.String())
		}
	}
	if i, j := strings.Index(buf.String(), "pass → fail"), strings.Index(buf.String(), "fail → pass"); i > j {
		t.Errorf("pass → fail is not listed first:\n%s", buf.String())
	}
}

// TestCompareGradeSetsSame: one set compared with an equal one changes
// nothing, and the JSON lists are empty, not null.
func TestCompareGradeSetsSame(t *testing.T) {
	gs := []grade.TrialGrade{tg("a", 1, "pass"), tg("a", 2, "fail"), tg("b", 1, "pass"), tg("b", 2, "pass")}
	c := report.CompareGradeSets(gradeSetReport("1", gs), gradeSetReport("3", gs), gs, gs)
	v := c.Variants[0]
	if len(v.Changed) != 0 || len(v.ChangedCases) != 0 || v.Worse || len(c.Notes) != 0 {
		t.Errorf("equal sets: changed %v, cases %v, worse %v, notes %v; want nothing", v.Changed, v.ChangedCases, v.Worse, c.Notes)
	}
	var buf bytes.Buffer
	c.WriteText(&buf)
	if !strings.Contains(buf.String(), "No trial's verdict changed.") {
		t.Errorf("the text of equal sets:\n%s", buf.String())
	}
	if v.Changed == nil || v.BaseJudges == nil || v.Judges == nil || c.Notes == nil {
		t.Errorf("a list is nil, so its JSON would be null: %+v", v)
	}
}
