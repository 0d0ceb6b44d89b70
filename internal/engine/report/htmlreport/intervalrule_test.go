package htmlreport_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport"
	"github.com/mst-eval/mst/transcript"
)

// TestIntervalRuleMark: a variant whose interval counts cases (every trial
// passed) has † after its interval and the page explains it under the
// table; a variant whose interval is clustered has neither.
func TestIntervalRuleMark(t *testing.T) {
	t.Parallel()
	f := func(x float64) *float64 { return &x }
	variant := func(name string, passed int, rule string) report.VariantStats {
		return report.VariantStats{
			Variant: name, PassRate: f(float64(passed) / 12), Interval: &report.Interval{Low: 0.4, High: 1},
			IntervalRule: rule, Passed: passed, Graded: 12, Cases: 4, ErrorGroups: []report.ErrorGroup{},
		}
	}
	page := func(vs ...report.VariantStats) string {
		rep := report.Report{Kind: report.Kind, Version: report.Version, Run: report.RunInfo{ID: "r", TrialsPerCase: 3},
			Variants: vs, Cases: []report.CaseRow{}, Comparisons: []report.Comparison{}}
		var buf bytes.Buffer
		if err := htmlreport.Write(t.Context(), &buf, rep, transcript.Run{ID: "r", Trials: 3}, nil); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}

	got := page(variant("all", 12, report.IntervalCases), variant("some", 9, report.IntervalClustered))
	for _, want := range []string{
		`data-rule="cases">`, `data-rule="clustered">`,
		`<span class="rule" title="interval on the number of cases">†</span></td>`,
		`<p class="method" id="interval-rule">† Every trial passed, every one failed, or there is one case`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("page with a variant whose every trial passed lacks %q", want)
		}
	}
	if n := strings.Count(got, "†"); n != 2 {
		t.Errorf("page with one interval on cases has %d †, want 2 (the mark and its legend)", n)
	}

	got = page(variant("some", 9, report.IntervalClustered))
	if strings.Contains(got, "†") || strings.Contains(got, `id="interval-rule"`) {
		t.Errorf("page with no interval on cases has a † or its legend")
	}
}
