package report_test

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

// advisoryRun is a run of one variant and two cases, two trials each, with
// a gating grader and an advisory judge (gate: false): case "kept" passes
// every gating grader on both trials and its advisory judge fails trial 1
// and passes trial 2; case "lost" fails its gating grader on both trials
// and its advisory judge fails trial 1 and errs on trial 2.
func advisoryRun() run {
	r := newRun("advisory", []string{"v"}, []string{"kept", "lost"}, 2)
	judge := func(passed bool) grade.Result {
		res := grade.Result{Grader: "judge polite by offline", Advisory: true, Passed: passed,
			Judge: &grade.Verdict{Hash: "5ca1ab1e", Model: "offline", Verdict: "pass", Score: 4, Scale: grade.Scale{Min: 1, Max: 5}}}
		if !passed {
			res.Judge.Verdict, res.Judge.Score = "fail", 1
			res.Detail = "the judge gave 1/5: curt-advisory-reason"
		}
		return res
	}
	for _, c := range []string{"kept", "lost"} {
		for n := 1; n <= 2; n++ {
			g := grade.TrialGrade{Key: transcript.Key{Case: c, Variant: "v", Trial: n}, Graded: true,
				Trial: grade.Summary{Status: transcript.Answered, DurationMs: 100}}
			gating := grade.Result{Grader: "toolCalled echo", Passed: true}
			if c == "lost" {
				gating.Detail = "echo-gating-reason was called 0 times"
				gating.Passed = false
			}
			adv := judge(n == 2 && c == "kept")
			if n == 2 && c == "lost" {
				adv = grade.Result{Grader: "judge polite by offline", Advisory: true, Error: "the judge model refused",
					Judge: &grade.Verdict{Hash: "5ca1ab1e", Model: "offline", Scale: grade.Scale{Min: 1, Max: 5}}}
			}
			g.Results = []grade.Result{gating, adv}
			g.Passed = c == "kept"
			r.grades = append(r.grades, g)
			r.in.Trials = append(r.in.Trials, report.NewTrial(g))
		}
	}
	return r
}

// TestResultLine marks each kind of result: a pass, a failure, a grader
// that gave no verdict, and an advisory judge that passed, failed or gave
// no verdict, which is never marked as a failure.
func TestResultLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    grade.Result
		want string
	}{
		{grade.Result{Grader: "toolCalled echo", Passed: true}, "✓ toolCalled echo"},
		{grade.Result{Grader: "toolCalled echo", Detail: "not called"}, "✗ toolCalled echo: not called"},
		{grade.Result{Grader: "judge x", Error: "refused"}, "! judge x: no verdict: refused"},
		{grade.Result{Grader: "judge x", Advisory: true, Passed: true}, "✓ judge x (advisory)"},
		{grade.Result{Grader: "judge x", Advisory: true, Detail: "the judge gave 1/5"}, "○ judge x (advisory): the judge gave 1/5"},
		{grade.Result{Grader: "judge x", Advisory: true, Error: "refused"}, "○ judge x (advisory): no verdict: refused"},
	} {
		if got := report.ResultLine(tc.r); got != tc.want {
			t.Errorf("ResultLine(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}

// TestFailuresAdvisory: --failures lists only the trials that failed a
// gating grader, with that grader's reason; an advisory judge that scored
// a trial low is no reason and never lists a passed trial, and beside a
// failed trial it is marked advisory.
func TestFailuresAdvisory(t *testing.T) {
	t.Parallel()
	r := advisoryRun()
	rep := report.Build(r.in)
	var out bytes.Buffer
	if err := rep.WriteFailures(&out, r.grades, 0); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "v/kept") {
		t.Errorf("--failures lists a trial that passed:\n%s", got)
	}
	for _, want := range []string{
		"  v/lost#1\n    toolCalled echo: echo-gating-reason was called 0 times\n    ○ judge polite by offline (advisory): the judge gave 1/5: curt-advisory-reason\n",
		"  v/lost#2\n    toolCalled echo: echo-gating-reason was called 0 times\n    ○ judge polite by offline (advisory): no verdict: the judge model refused\n",
		"2 trials failed", report.AdvisoryNote,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("--failures lacks %q:\n%s", want, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "judge polite") && !strings.Contains(line, "○") {
			t.Errorf("--failures shows the advisory judge unmarked: %q", line)
		}
	}
}

// TestJUnitAdvisory: a case whose trials passed every gating grader is a
// pass in JUnit however its advisory judge scored them, with what the
// judge said in its system-out; a case that failed a gating grader is a
// failure whose body gives that grader's reason and not the advisory
// judge's, which is in its system-out. The XML holds to the schema.
func TestJUnitAdvisory(t *testing.T) {
	t.Parallel()
	r := advisoryRun()
	rep := report.Build(r.in)
	_, raw := readJUnit(t, rep, r.grades)
	var doc struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Body string `xml:",chardata"`
				} `xml:"failure"`
				Error     *struct{} `xml:"error"`
				Skipped   *struct{} `xml:"skipped"`
				SystemOut *string   `xml:"system-out"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 2 || doc.Suites[0].Failures != 1 {
		t.Fatalf("want one suite of two cases with one failure:\n%s", raw)
	}
	kept, lost := doc.Suites[0].Cases[0], doc.Suites[0].Cases[1]
	if kept.Failure != nil || kept.Error != nil || kept.Skipped != nil {
		t.Errorf("case kept passed every gating grader and is not a pass:\n%s", raw)
	}
	if kept.SystemOut == nil || !strings.Contains(*kept.SystemOut, "trial 1: ○ judge polite by offline (advisory): the judge gave 1/5: curt-advisory-reason") || strings.Contains(*kept.SystemOut, "trial 2") {
		t.Errorf("case kept's system-out does not list what its advisory judge said of trial 1 (only):\n%s", raw)
	}
	if lost.Failure == nil || !strings.Contains(lost.Failure.Body, "echo-gating-reason") || strings.Contains(lost.Failure.Body, "curt-advisory-reason") || strings.Contains(lost.Failure.Body, "refused") {
		t.Errorf("case lost's failure does not give the gating reason alone:\n%s", raw)
	}
	if lost.SystemOut == nil || !strings.Contains(*lost.SystemOut, "curt-advisory-reason") || !strings.Contains(*lost.SystemOut, "no verdict: the judge model refused") {
		t.Errorf("case lost's system-out does not list its advisory judge:\n%s", raw)
	}
}
