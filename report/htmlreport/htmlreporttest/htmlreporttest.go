// Package htmlreporttest checks an HTML report open in Chromium against the
// JSON report it was made from: the numbers the page shows, and a
// transcript opened from the grid.
package htmlreporttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mst-eval/mst/internal/chromiumtest"
)

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
	PassK       [][]string
	Cells       [][]string
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
		check("missing", g.Missing, w.Missing.String())
		check("errored", g.Errored, w.Outcomes["errored"].String())
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

// OpenCell clicks a cell of the grid and waits for its transcript.
func OpenCell(t *testing.T, p *chromiumtest.Page, ci, vi int) {
	t.Helper()
	p.Click(t, fmt.Sprintf(`#cases td.cell[data-c="%d"][data-v="%d"]`, ci, vi))
	p.WaitVisible(t, "#viewer #trial-title")
}
