package cli_test

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport/htmlreporttest"
	"github.com/mst-eval/mst/internal/testkit/chromiumtest"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// advisoryTrials are trials of a run: one that passed every gating
// grader and that the advisory judge failed, one that failed a gating
// grader, and a case whose trials under one variant all passed although
// the advisory judge failed one or more of them.
type advisoryTrials struct {
	passed, failed grade.TrialGrade
	passedCase     transcript.Key // Trial unset
}

// findAdvisoryTrials reads the grades of a quickstart run: its judge is
// advisory (gate: false) and fails some trials that pass every gating
// grader.
func findAdvisoryTrials(t *testing.T, runDir string) advisoryTrials {
	t.Helper()
	st, err := store.OpenRunDir(runDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var a advisoryTrials
	byCell := map[transcript.Key][]grade.TrialGrade{}
	var cells []transcript.Key
	err = st.Grades(t.Context(), func(g grade.TrialGrade) error {
		lowAdvisory := false
		for _, r := range g.Results {
			lowAdvisory = lowAdvisory || r.Advisory && !r.Passed
		}
		switch {
		case g.Graded && g.Passed && lowAdvisory && a.passed.Key.Case == "":
			a.passed = g
		case g.Graded && !g.Passed && g.Failed == "" && a.failed.Key.Case == "":
			a.failed = g
		}
		cell := transcript.Key{Case: g.Key.Case, Variant: g.Key.Variant}
		if _, ok := byCell[cell]; !ok {
			cells = append(cells, cell)
		}
		byCell[cell] = append(byCell[cell], g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, cell := range cells {
		all, low := true, false
		for _, g := range byCell[cell] {
			all = all && g.Graded && g.Passed
			for _, r := range g.Results {
				low = low || r.Advisory && !r.Passed
			}
		}
		if all && low && a.passedCase.Case == "" {
			a.passedCase = cell
		}
	}
	if a.passed.Key.Case == "" || a.failed.Key.Case == "" || a.passedCase.Case == "" {
		t.Fatalf("the quickstart run has no passed trial its advisory judge failed, no failed trial, or no case all of whose trials passed with a low advisory score: %+v", a)
	}
	return a
}

// TestAdvisoryJudgeShown runs the quickstart, whose judge is advisory
// (gate: false), and reads its results every way a person does: a trial
// that passed every gating grader and that the judge failed shows the
// judge with the advisory mark and the word advisory, never a cross, in
// mst show and on the HTML page, never appears in --failures, and is no
// failure in JUnit (the judge's word is in the testcase's system-out); a
// trial that failed a gating grader shows that grader's cross, and is a
// failure whose reasons leave out the advisory judge.
func TestAdvisoryJudgeShown(t *testing.T) {
	t.Parallel()
	p := chromiumtest.New(t) // fails under CI, before the run, when Chromium is missing
	runDir, _ := htmlQuickstartRun(t)
	a := findAdvisoryTrials(t, runDir)
	show := func(g grade.TrialGrade) string {
		t.Helper()
		code, out, stderr := mst(t, nil, "show", runDir, g.Key.Variant, g.Key.Case, fmt.Sprint(g.Key.Trial))
		if code != 0 {
			t.Fatalf("mst show %s: exit %d: %s", g.Key, code, stderr)
		}
		return out[strings.Index(out, "Grade:"):]
	}

	t.Run("show", func(t *testing.T) {
		got := show(a.passed)
		if !strings.HasPrefix(got, "Grade:   passed\n") || strings.Contains(got, "✗") {
			t.Errorf("mst show %s (passed) shows a failure:\n%s", a.passed.Key, got)
		}
		if !strings.Contains(got, "  ○ judge supported by offline (advisory): the judge gave ") || !strings.Contains(got, "○ advisory: a judge with gate: false") {
			t.Errorf("mst show %s does not mark its advisory judge as advisory:\n%s", a.passed.Key, got)
		}
		got = show(a.failed)
		if !strings.HasPrefix(got, "Grade:   failed\n") || !strings.Contains(got, "\n  ✗ ") || strings.Contains(got, "✗ judge") {
			t.Errorf("mst show %s (failed) does not show its failing grader alone with a cross:\n%s", a.failed.Key, got)
		}
	})

	t.Run("failures", func(t *testing.T) {
		code, out, stderr := mst(t, nil, "report", runDir, "--failures")
		if code != 0 {
			t.Fatalf("mst report --failures: exit %d: %s", code, stderr)
		}
		list := out[strings.Index(out, "Failed trials:"):]
		if strings.Contains(list, "  "+a.passed.Key.String()+"\n") {
			t.Errorf("--failures lists %s, which passed:\n%s", a.passed.Key, list)
		}
		if !strings.Contains(list, "  "+a.failed.Key.String()+"\n") {
			t.Errorf("--failures does not list %s, which failed:\n%s", a.failed.Key, list)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, "judge supported") && !strings.HasPrefix(strings.TrimSpace(line), "○ judge supported by offline (advisory)") {
				t.Errorf("--failures gives the advisory judge as a reason: %q", line)
			}
		}
	})

	t.Run("junit", func(t *testing.T) {
		code, out, stderr := mst(t, nil, "report", runDir, "--junit", "-")
		if code != 0 {
			t.Fatalf("mst report --junit -: exit %d: %s", code, stderr)
		}
		var doc struct {
			Suites []struct {
				Name  string `xml:"name,attr"`
				Cases []struct {
					Name    string `xml:"name,attr"`
					Failure *struct {
						Body string `xml:",chardata"`
					} `xml:"failure"`
					SystemOut string `xml:"system-out"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, s := range doc.Suites {
			for _, c := range s.Cases {
				if c.Failure != nil && strings.Contains(c.Failure.Body, "judge supported") {
					t.Errorf("%s/%s: the failure gives the advisory judge as a reason: %s", s.Name, c.Name, c.Failure.Body)
				}
				if s.Name == a.passedCase.Variant && c.Name == a.passedCase.Case {
					found++
					if c.Failure != nil {
						t.Errorf("%s/%s passed every gating grader and is a JUnit failure: %s", s.Name, c.Name, c.Failure.Body)
					}
					if !strings.Contains(c.SystemOut, "○ judge supported by offline (advisory)") {
						t.Errorf("%s/%s: system-out does not give the advisory judge's word: %q", s.Name, c.Name, c.SystemOut)
					}
				}
				if s.Name == a.failed.Key.Variant && c.Name == a.failed.Key.Case && c.Failure == nil {
					t.Errorf("%s/%s has a failed trial and is no JUnit failure", s.Name, c.Name)
				}
			}
		}
		if found != 1 {
			t.Errorf("JUnit has %d testcases of %s, want 1", found, a.passedCase)
		}
	})

	t.Run("html", func(t *testing.T) {
		page := "file://" + runDir + "/report.html"
		for _, width := range []int64{1366, 390} {
			p.Resize(t, width, 900)
			p.Open(t, page, `html[data-ready="1"]`)
			for _, problem := range htmlreporttest.LayoutProblems(t, p) {
				t.Errorf("at %d px: %s", width, problem)
			}
			if width == 1366 {
				// With the columns that say nothing left out, the variants
				// table fits the window without scrolling.
				if over := chromiumtest.Eval[int](t, p, `(() => { const s = document.querySelector("#variants").parentElement; return s.scrollWidth - s.clientWidth; })()`); over > 0 {
					t.Errorf("at 1366 px the variants table is %d px wider than its box", over)
				}
			}
			p.FullScreenshot(t, fmt.Sprintf("quickstart-report-%d.png", width))
		}
		p.Resize(t, 1366, 900)
		p.Open(t, page, `html[data-ready="1"]`)
		ci, vi := htmlCell(t, runDir, a.passed.Key)
		htmlreporttest.OpenCell(t, p, ci, vi)
		tab := fmt.Sprintf(`#viewer-tabs button[data-trial="%d-%d-%d"]`, ci, vi, a.passed.Key.Trial)
		p.Click(t, tab)
		p.WaitVisible(t, tab+".on")
		items := chromiumtest.Eval[[]string](t, p, `[...document.querySelectorAll("#trial-grades li")].map(li => li.className + " " + li.textContent)`)
		advisory := 0
		for _, it := range items {
			if strings.HasPrefix(it, "st-fail") || strings.Contains(it, "✗") {
				t.Errorf("the page shows %s, which passed, with a failure: %q", a.passed.Key, it)
			}
			if strings.HasPrefix(it, "st-advisory ○ judge supported by offline") && strings.Contains(it, "advisory") {
				advisory++
			}
		}
		if advisory != 1 {
			t.Errorf("the page does not show %s's advisory judge as advisory: %q", a.passed.Key, items)
		}
		p.Screenshot(t, "quickstart-advisory.png")
		p.NoErrors(t)
	})
}

// htmlCell is the grid cell the HTML page shows a trial in: the case's
// and the variant's index in the report.
func htmlCell(t *testing.T, runDir string, k transcript.Key) (int, int) {
	t.Helper()
	code, out, stderr := mst(t, nil, "report", runDir, "--json")
	if code != 0 {
		t.Fatalf("mst report --json: exit %d: %s", code, stderr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return htmlreporttest.CellOf(t, rep, k)
}
