// Package htmlreporttest checks an HTML report open in Chromium against the
// JSON report it was made from: the numbers the page shows, and a
// transcript opened from the grid.
package htmlreporttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/testkit/chromiumtest"
	"github.com/mst-eval/mst/transcript"
)

// CellOf is the grid cell the page shows a trial in: its case's and its
// variant's index in rep. It fails the test when rep has neither.
func CellOf(t testing.TB, rep report.Report, k transcript.Key) (caseIndex, variantIndex int) {
	t.Helper()
	caseIndex, variantIndex = -1, -1
	for i, c := range rep.Cases {
		if c.Case == k.Case {
			caseIndex = i
		}
	}
	for i, v := range rep.Variants {
		if v.Variant == k.Variant {
			variantIndex = i
		}
	}
	if caseIndex < 0 || variantIndex < 0 {
		t.Fatalf("%s is not in the report", k)
	}
	return caseIndex, variantIndex
}

// jsonReport is the part of --json's report the page's numbers are
// checked against, its numbers kept as the text --json wrote.
type jsonReport struct {
	Counts   map[string]json.Number `json:"counts"`
	Variants []struct {
		PassRate *json.Number `json:"passRate"`
		Interval *struct {
			Low, High json.Number
		} `json:"interval"`
		Passed, Graded, Cases, Missing json.Number
		Outcomes                       map[string]json.Number `json:"outcomes"`
		PassK                          []struct {
			K               json.Number
			PassAt, PassHat *json.Number
		} `json:"passK"`
		Judges []struct {
			Grader, Hash                   string
			Scale                          struct{ Min, Max json.Number }
			Scored, Passed, Errored, Cases json.Number
			Mean                           *json.Number
			Interval                       *struct{ Low, High json.Number }
		} `json:"judges"`
		GradeErrors json.Number `json:"gradeErrors"`
	} `json:"variants"`
	Cases []struct {
		Variants []struct{ Passed, Graded json.Number } `json:"variants"`
	} `json:"cases"`
	Comparisons []struct {
		MeanA, MeanB, MeanDifference, SignTestP *json.Number
		Interval                                *struct{ Low, High json.Number }
		Cases, BBetter, ABetter, Ties           json.Number
	} `json:"comparisons"`
}

func decodeReport(t *testing.T, b []byte) jsonReport {
	t.Helper()
	var r jsonReport
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func numText(n *json.Number) string {
	if n == nil {
		return "null"
	}
	return n.String()
}

func pctText(n *json.Number) string {
	if n == nil {
		return "–"
	}
	f, _ := n.Float64()
	return fmt.Sprintf("%.1f%%", f*100)
}

// pageNumbers reads every number the page shows, as the page shows it.
const pageNumbers = `(() => {
  const val = (root, f) => { const e = root.querySelector('[data-field="' + f + '"]'); return e ? e.getAttribute("data-value") : "absent"; };
  const txt = (root, f) => { const e = root.querySelector('[data-field="' + f + '"]'); return e ? e.textContent : "absent"; };
  const counts = {};
  for (const e of document.querySelectorAll("#counts [data-count]")) counts[e.getAttribute("data-count")] = e.textContent;
  return {
    counts,
    variants: [...document.querySelectorAll("#variants tbody tr")].map(tr => ({
      rate: val(tr, "passRate"), rateText: txt(tr, "passRate"), low: val(tr, "low"), high: val(tr, "high"),
      lowText: txt(tr, "low"), highText: txt(tr, "high"),
      passed: txt(tr, "passed"), graded: txt(tr, "graded"), cases: txt(tr, "cases"), missing: txt(tr, "missing"), errored: txt(tr, "errored"),
    })),
    passK: [...document.querySelectorAll("#passk tbody tr")].map(tr => [...tr.querySelectorAll("td")].map(td => td.getAttribute("data-field") + td.getAttribute("data-k") + "=" + td.getAttribute("data-value"))),
    cells: [...document.querySelectorAll("#cases tbody tr")].map(tr => [...tr.querySelectorAll("td.cell")].map(td => txt(td, "passed") + "/" + txt(td, "graded"))),
    judges: [...document.querySelectorAll("#judge-table tbody tr")].map(tr => ({
      variant: tr.getAttribute("data-variant"), judge: tr.getAttribute("data-judge"),
      mean: val(tr, "mean"), meanText: txt(tr, "mean"), low: val(tr, "low"), high: val(tr, "high"), lowText: txt(tr, "low"), highText: txt(tr, "high"),
      scale: txt(tr, "scale"), passed: txt(tr, "passed"), scored: txt(tr, "scored"), errored: txt(tr, "errored"),
    })),
    gradeErrors: txt(document, "gradeErrors"),
    comparisons: [...document.querySelectorAll("#comparison-table tbody tr")].map(tr => ({
      meanA: val(tr, "meanA"), meanB: val(tr, "meanB"), diff: val(tr, "meanDifference"), p: val(tr, "signTestP"),
      low: val(tr, "low"), high: val(tr, "high"), bBetter: txt(tr, "bBetter"), aBetter: txt(tr, "aBetter"), ties: txt(tr, "ties"),
    })),
  };
})()`

type shownNumbers struct {
	Counts   map[string]string
	Variants []struct {
		Rate, RateText, Low, High, LowText, HighText string
		Passed, Graded, Cases, Missing, Errored      string
	}
	PassK  [][]string
	Cells  [][]string
	Judges []struct {
		Variant, Judge, Mean, MeanText, Low, High, LowText, HighText string
		Scale, Passed, Scored, Errored                               string
	}
	GradeErrors string
	Comparisons []struct {
		MeanA, MeanB, Diff, P, Low, High string
		BBetter, ABetter, Ties           string
	}
}

// CheckNumbers compares what the page in p shows with the report --json
// printed.
func CheckNumbers(t *testing.T, p *chromiumtest.Page, reportJSON []byte) {
	t.Helper()
	want := decodeReport(t, reportJSON)
	got := chromiumtest.Eval[shownNumbers](t, p, pageNumbers)
	for k, n := range want.Counts {
		if k == "planned" {
			continue
		}
		if got.Counts[k] != n.String() && !(n.String() == "0" && got.Counts[k] == "") {
			t.Errorf("counts.%s: the page shows %q, --json says %s", k, got.Counts[k], n)
		}
	}
	if len(got.Variants) != len(want.Variants) {
		t.Fatalf("the page shows %d variants, --json has %d", len(got.Variants), len(want.Variants))
	}
	// The page leaves out a column of counts that is 0 in every variant,
	// and shows it for every variant when one has a count.
	var missingZero, erroredZero = true, true
	for _, w := range want.Variants {
		missingZero = missingZero && w.Missing.String() == "0"
		erroredZero = erroredZero && w.Outcomes["errored"].String() == "0"
	}
	column := func(zero bool, want string) string {
		if zero {
			return "absent"
		}
		return want
	}
	for i, w := range want.Variants {
		g := got.Variants[i]
		check := func(what, got, want string) {
			if got != want {
				t.Errorf("variant %d %s: the page shows %q, --json says %q", i, what, got, want)
			}
		}
		check("passRate", g.Rate, numText(w.PassRate))
		check("pass rate text", g.RateText, pctText(w.PassRate))
		if w.Interval != nil {
			check("interval.low", g.Low, w.Interval.Low.String())
			check("interval.high", g.High, w.Interval.High.String())
			check("interval.low text", g.LowText, pctText(&w.Interval.Low))
			check("interval.high text", g.HighText, pctText(&w.Interval.High))
		} else {
			check("interval", g.Low, "absent")
		}
		check("passed", g.Passed, w.Passed.String())
		check("graded", g.Graded, w.Graded.String())
		check("cases", g.Cases, w.Cases.String())
		check("missing", g.Missing, column(missingZero, w.Missing.String()))
		check("errored", g.Errored, column(erroredZero, w.Outcomes["errored"].String()))
		if len(w.PassK) > 1 {
			var pk []string
			for _, k := range w.PassK {
				pk = append(pk, "passAt"+k.K.String()+"="+numText(k.PassAt))
			}
			for _, k := range w.PassK[1:] {
				pk = append(pk, "passHat"+k.K.String()+"="+numText(k.PassHat))
			}
			check("pass@k and pass^k", fmt.Sprint(got.PassK[i]), fmt.Sprint(pk))
		}
	}
	checkJudges(t, got, want)
	if len(got.Cells) != len(want.Cases) {
		t.Fatalf("the grid has %d rows, --json %d cases", len(got.Cells), len(want.Cases))
	}
	for i, c := range want.Cases {
		var cells []string
		for _, v := range c.Variants {
			cells = append(cells, v.Passed.String()+"/"+v.Graded.String())
		}
		if fmt.Sprint(got.Cells[i]) != fmt.Sprint(cells) {
			t.Errorf("grid row %d: the page shows %v, --json says %v", i, got.Cells[i], cells)
		}
	}
	if len(got.Comparisons) != len(want.Comparisons) {
		t.Fatalf("the page shows %d comparisons, --json has %d", len(got.Comparisons), len(want.Comparisons))
	}
	for i, w := range want.Comparisons {
		g := got.Comparisons[i]
		wl, wh := "absent", "absent"
		if w.Interval != nil {
			wl, wh = w.Interval.Low.String(), w.Interval.High.String()
		}
		gs := fmt.Sprint(g.MeanA, g.MeanB, g.Diff, g.P, g.Low, g.High, g.BBetter, g.ABetter, g.Ties)
		ws := fmt.Sprint(numText(w.MeanA), numText(w.MeanB), numText(w.MeanDifference), numText(w.SignTestP), wl, wh, w.BBetter, w.ABetter, w.Ties)
		if gs != ws {
			t.Errorf("comparison %d: the page shows %s, --json says %s", i, gs, ws)
		}
	}
}

// checkJudges compares the page's judge table with each variant's judges
// in --json: one row per judge and variant, its numbers as --json has
// them (and shown to 0.01), and the count of trials no judge could grade.
func checkJudges(t *testing.T, got shownNumbers, want jsonReport) {
	t.Helper()
	rows := map[string]int{}
	for i, r := range got.Judges {
		rows[r.Variant+"/"+r.Judge] = i
	}
	judges, gradeErrors := 0, 0
	for vi, v := range want.Variants {
		n, _ := v.GradeErrors.Int64()
		gradeErrors += int(n)
		for ji, w := range v.Judges {
			judges++
			i, ok := rows[fmt.Sprintf("%d/%d", vi, ji)]
			if !ok {
				t.Errorf("variant %d judge %d (%s #%s): not in the page's judge table", vi, ji, w.Grader, w.Hash)
				continue
			}
			g := got.Judges[i]
			wl, wh, wlt, wht := "absent", "absent", "absent", "absent"
			if w.Interval != nil {
				wl, wh, wlt, wht = w.Interval.Low.String(), w.Interval.High.String(), scoreText(&w.Interval.Low), scoreText(&w.Interval.High)
			}
			meanText := "–"
			if w.Mean != nil {
				meanText = scoreText(w.Mean)
				if w.Interval != nil {
					meanText += " [" + wlt + ", " + wht + "]"
				}
			}
			gs := fmt.Sprint(g.Mean, g.MeanText, g.Low, g.High, g.LowText, g.HighText, g.Scale, g.Passed, g.Scored, g.Errored)
			ws := fmt.Sprint(numText(w.Mean), meanText, wl, wh, wlt, wht, w.Scale.Min.String()+"–"+w.Scale.Max.String(), w.Passed, w.Scored, w.Errored)
			if gs != ws {
				t.Errorf("variant %d judge %d (%s #%s): the page shows %s, --json says %s", vi, ji, w.Grader, w.Hash, gs, ws)
			}
		}
	}
	if len(got.Judges) != judges {
		t.Errorf("the page's judge table has %d rows, --json has %d judges", len(got.Judges), judges)
	}
	if wantErrs := fmt.Sprint(gradeErrors); gradeErrors == 0 && got.GradeErrors != "absent" || gradeErrors > 0 && got.GradeErrors != wantErrs {
		t.Errorf("trials no judge could grade: the page shows %q, --json says %d", got.GradeErrors, gradeErrors)
	}
}

// scoreText is a judge's score as the reports show it.
func scoreText(n *json.Number) string {
	f, _ := n.Float64()
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// OpenCell clicks a cell of the grid and waits for its transcript.
func OpenCell(t *testing.T, p *chromiumtest.Page, ci, vi int) {
	t.Helper()
	p.Click(t, fmt.Sprintf(`#cases td.cell[data-c="%d"][data-v="%d"]`, ci, vi))
	p.WaitVisible(t, "#viewer #trial-title")
}

// LayoutProblems lists what of the page in p does not fit its window: a
// page wider than the window, an element (outside a box that scrolls
// sideways, as the tables do) that reaches past the window's left or right
// edge, and a text of the chart cut off at the chart's edges. Empty is
// good.
func LayoutProblems(t *testing.T, p *chromiumtest.Page) []string {
	t.Helper()
	return chromiumtest.Eval[[]string](t, p, layoutProblems)
}

const layoutProblems = `(() => {
  const vw = document.documentElement.clientWidth;
  const out = [];
  const doc = document.documentElement.scrollWidth;
  if (doc > vw) out.push("the page is " + doc + " px wide in a window " + vw + " px wide");
  const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.split(" ")[0] : "");
  for (const e of document.querySelectorAll("body *")) {
    if (e.parentElement && e.parentElement.closest(".scroll, [hidden], script, svg")) continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.left < -0.5 || r.right > vw + 0.5) out.push(name(e) + " spans " + Math.round(r.left) + " to " + Math.round(r.right) + " px");
  }
  for (const svg of document.querySelectorAll("svg.chart")) {
    const s = svg.getBoundingClientRect();
    if (s.width === 0) continue; // the chart for the other width
    for (const x of svg.querySelectorAll("text")) {
      const r = x.getBoundingClientRect();
      if (r.left < s.left - 0.5 || r.right > s.right + 0.5 || r.top < s.top - 0.5 || r.bottom > s.bottom + 0.5) {
        out.push("the chart cuts off " + JSON.stringify(x.textContent));
      }
    }
  }
  return out;
})()`
