package htmlreport_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport/htmlreporttest"
	"github.com/mst-eval/mst/internal/testkit/chromiumtest"
	"github.com/mst-eval/mst/transcript"
)

// optionalColumns are the data-col names of the variants table's columns
// that the page leaves out when no variant has a value in them.
var optionalColumns = []string{"client", "model", "noAnswer", "timedOut", "errored", "cancelled", "skipped", "missing", "tokens", "latency", "toolCalls"}

// layoutVariants names the full fixture's variants: a short name, one
// longer than the chart shows, and one of wide characters.
func layoutVariants(s string) string {
	switch s {
	case "variant-0":
		return "terse"
	case "variant-1":
		return "clear, with every tool description rewritten by hand"
	case "variant-2":
		return "説明を書き直した変種"
	}
	return s
}

// fullFixture is a run of three variants with a value in every optional
// column of the variants table: trials that passed, failed, ended without
// an answer, timed out, errored, were cancelled, were skipped and are
// missing, with tokens, latency and tool calls. An advisory judge (gate:
// false) scores every graded trial, passing some and failing others, the
// passed trials among them.
func fullFixture() fixture {
	f := makeFixture(spec{cases: 10, variants: 3, trials: 3, missing: 13, name: layoutVariants,
		judges: []judgeSpec{{grader: "judge polite by offline", hash: "5ca1ab1e0042", scale: grade.Scale{Min: 1, Max: 5}}}})
	// The fixture's outcomes by variant: give each variant's first answered
	// trials, in turn, each outcome it may lack.
	changed := map[string]int{}
	for i, tr := range f.src.transcripts {
		g := &f.src.grades[i]
		if tr.Outcome.Status == transcript.Answered && tr.Key.Trial == 1 {
			changed[tr.Key.Variant]++
			switch changed[tr.Key.Variant] {
			case 1:
				tr.Outcome, tr.Answer = transcript.Outcome{Status: transcript.NoAnswer}, ""
				g.Trial = transcript.Summarize(tr)
				g.Graded, g.Passed, g.Failed = true, false, "the trial ended no-answer, without an answer; only an answered trial can pass"
			case 2, 3, 4:
				tr.Outcome = []transcript.Outcome{
					{Status: transcript.Skipped, Detail: "the variant was stopped: too many errors"},
					{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: "the client crashed"},
					{Status: transcript.Cancelled, Detail: "interrupted"},
				}[changed[tr.Key.Variant]-2]
				*g = grade.TrialGrade{Key: tr.Key, Trial: transcript.Summarize(tr)}
			case 5:
				tr.Outcome = transcript.Outcome{Status: transcript.TimedOut, Detail: "timeout 2m passed"}
				g.Trial = transcript.Summarize(tr)
				g.Graded, g.Passed, g.Failed = true, false, "timed out"
			}
		}
		for j := range g.Results {
			if g.Results[j].Judge != nil {
				g.Results[j].Advisory = true // the fixture's judges decide nothing
				if !g.Results[j].Passed {
					g.Results[j].Detail = "the judge gave 1/5: curt"
				}
			}
		}
	}
	return f.rebuilt()
}

// rebuilt is f with its report built again from its grades.
func (f fixture) rebuilt() fixture {
	in := report.Input{Run: f.rec}
	for _, v := range f.rep.Variants {
		in.Variants = append(in.Variants, report.VariantInfo{Name: v.Variant, Client: v.Client, Model: v.Model, Description: v.Description})
	}
	for _, c := range f.rep.Cases {
		in.Cases = append(in.Cases, c.Case)
	}
	for _, g := range f.src.grades {
		in.Trials = append(in.Trials, report.NewTrial(g))
	}
	f.rep = report.Build(in)
	return f
}

// emptyFixture is a run of two variants, named and nothing else, with no
// case: every optional column of the variants table is empty.
func emptyFixture() fixture {
	rec := transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "run-empty", Eval: "empty eval",
		Variants: []string{"a", "b"}, Trials: 1, Collect: transcript.CollectComplete}
	rep := report.Build(report.Input{Run: rec, Variants: []report.VariantInfo{{Name: "a"}, {Name: "b"}}, Cases: []string{}})
	return fixture{rec: rec, rep: rep, src: &memSource{}}
}

// TestVariantColumns: the variants table shows every optional column
// when each has a value in some variant, and none of them, with a note
// naming each, when all are empty; the tool calls column shows a number.
func TestVariantColumns(t *testing.T) {
	t.Parallel()
	full := fullFixture()
	for _, v := range full.rep.Variants {
		o := v.Outcomes
		if o.NoAnswer == 0 || o.TimedOut == 0 || o.Errored == 0 || o.Cancelled == 0 || o.Skipped == 0 || v.Missing == 0 || v.ToolCalls.Mean == nil {
			t.Fatalf("the full fixture leaves a column empty in variant %s: %+v, missing %d", v.Variant, o, v.Missing)
		}
	}
	page := string(full.html(t))
	for _, c := range optionalColumns {
		if !strings.Contains(page, `<th data-col="`+c+`">`) {
			t.Errorf("the full page has no %s column", c)
		}
	}
	if strings.Contains(page, `id="hidden-columns"`) {
		t.Error("the full page says it left out columns")
	}
	calls := regexp.MustCompile(`<td data-field="toolCalls">([^<]*)</td>`).FindAllStringSubmatch(page, -1)
	if len(calls) != len(full.rep.Variants) {
		t.Fatalf("the full page has %d tool call cells, want %d", len(calls), len(full.rep.Variants))
	}
	for i, m := range calls {
		if want := fmt.Sprintf("%.2f", *full.rep.Variants[i].ToolCalls.Mean); m[1] != want {
			t.Errorf("variant %d: tool calls / trial shows %q, want %q", i, m[1], want)
		}
	}

	empty := string(emptyFixture().html(t))
	for _, c := range optionalColumns {
		if strings.Contains(empty, `data-col="`+c+`"`) {
			t.Errorf("the empty page shows the %s column", c)
		}
	}
	note := regexp.MustCompile(`<p class="method" id="hidden-columns">([^<]*)</p>`).FindStringSubmatch(empty)
	if note == nil {
		t.Fatal("the empty page does not say which columns it left out")
	}
	for _, name := range []string{"client", "model", "no answer", "timed out", "errored", "cancelled", "skipped", "missing", "tokens", "latency", "tool calls / trial"} {
		if !strings.Contains(note[1], name) {
			t.Errorf("the note %q does not name the %s column", note[1], name)
		}
	}
	for name, p := range map[string]string{"full": page, "empty": empty} {
		if i := strings.Index(p, "%!"); i >= 0 {
			t.Errorf("the %s page holds a formatting error: %q", name, p[max(0, i-80):min(len(p), i+80)])
		}
	}
}

// TestLayoutInChromium opens the page of a run with every column filled
// and one with every column empty at 1366 and 390 pixels wide: nothing
// reaches past the window (a table scrolls in its own box), the chart
// shows its labels and values whole, and a full screenshot of each is
// kept. In the full run, a trial that passed although its advisory judge
// failed it shows the judge with the advisory mark, not a failure's
// cross, and a trial that failed shows its failing grader with the cross.
func TestLayoutInChromium(t *testing.T) {
	t.Parallel()
	p := chromiumtest.New(t)
	full := fullFixture()
	for _, f := range []struct {
		name string
		fx   fixture
	}{{"full", full}, {"empty", emptyFixture()}} {
		url := writePage(t, f.fx)
		for _, width := range []int64{1366, 390} {
			t.Run(fmt.Sprintf("%s at %d", f.name, width), func(t *testing.T) {
				p.Resize(t, width, 900)
				p.Open(t, url, `html[data-ready="1"]`)
				htmlreporttest.CheckNumbers(t, p, f.fx.reportJSON(t))
				for _, problem := range htmlreporttest.LayoutProblems(t, p) {
					t.Error(problem)
				}
				if body := chromiumtest.Eval[string](t, p, `document.body.innerText`); strings.Contains(body, "%!") {
					t.Errorf("the page shows a formatting error:\n%s", body)
				}
				p.FullScreenshot(t, fmt.Sprintf("htmlreport-%s-%d.png", f.name, width))
				p.NoErrors(t)
			})
		}
	}

	t.Run("advisory", func(t *testing.T) {
		p.Resize(t, 1366, 900)
		p.Open(t, writePage(t, full), `html[data-ready="1"]`)
		var passed, failed *grade.TrialGrade
		for i := range full.src.grades {
			g := &full.src.grades[i]
			switch {
			case passed == nil && g.Graded && g.Passed && report.HasAdvisory(g.Results):
				passed = g
			case failed == nil && g.Graded && !g.Passed && g.Failed == "":
				failed = g
			}
		}
		if passed == nil || failed == nil {
			t.Fatal("the fixture has no passed trial with a low advisory judge, or no failed trial")
		}
		type shown struct {
			Verdict string
			Items   []struct{ Class, Text, Advisory string }
			Note    bool
		}
		read := func(g *grade.TrialGrade) shown {
			t.Helper()
			ci, vi := htmlreporttest.CellOf(t, full.rep, g.Key)
			htmlreporttest.OpenCell(t, p, ci, vi)
			tab := fmt.Sprintf(`#viewer-tabs button[data-trial="%d-%d-%d"]`, ci, vi, g.Key.Trial)
			p.Click(t, tab)
			p.WaitVisible(t, tab+".on")
			return chromiumtest.Eval[shown](t, p, `({
				verdict: document.getElementById("trial-verdict").textContent,
				items: [...document.querySelectorAll("#trial-grades li")].map(li => ({class: li.className, text: li.textContent, advisory: li.getAttribute("data-advisory") || ""})),
				note: !!document.getElementById("advisory-note"),
			})`)
		}
		got := read(passed)
		if !strings.HasPrefix(got.Verdict, "passed") {
			t.Errorf("the passed trial %s shows %q", passed.Key, got.Verdict)
		}
		advisory := 0
		for _, it := range got.Items {
			if strings.Contains(it.Text, "✗") || it.Class == "st-fail" {
				t.Errorf("the passed trial %s shows a failure: %+v", passed.Key, it)
			}
			if it.Advisory == "not-passed" {
				advisory++
				if it.Class != "st-advisory" || !strings.HasPrefix(it.Text, "○ ") || !strings.Contains(it.Text, "advisory") {
					t.Errorf("the advisory judge of %s is shown as %+v, want the ○ mark, the word advisory and class st-advisory", passed.Key, it)
				}
			}
		}
		if advisory == 0 || !got.Note {
			t.Errorf("the passed trial %s shows no advisory judge that failed it, or no note (%+v)", passed.Key, got)
		}
		p.Screenshot(t, "htmlreport-advisory.png")
		got = read(failed)
		if !strings.HasPrefix(got.Verdict, "failed") {
			t.Errorf("the failed trial %s shows %q", failed.Key, got.Verdict)
		}
		crosses := 0
		for _, it := range got.Items {
			if it.Class == "st-fail" && strings.HasPrefix(it.Text, "✗ ") && it.Advisory == "" {
				crosses++
			}
			if it.Advisory != "" && it.Class == "st-fail" {
				t.Errorf("the failed trial %s shows its advisory judge as a failure: %+v", failed.Key, it)
			}
		}
		if crosses == 0 {
			t.Errorf("the failed trial %s shows no failing grader: %+v", failed.Key, got.Items)
		}
		p.NoErrors(t)
	})
}
