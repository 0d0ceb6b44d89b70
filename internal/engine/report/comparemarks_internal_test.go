package report

import (
	"strings"
	"testing"
)

// TestCompareMarksCasesIntervals: a comparison marks a pass-rate interval
// that counts each case as one trial, as the report does, and explains the
// mark once; intervals of the clustered rule are not marked.
func TestCompareMarksCasesIntervals(t *testing.T) {
	t.Parallel()
	one, half := 1.0, 0.5
	c := RunComparison{Variants: []VariantChange{
		{Variant: "all", Base: RateStats{PassRate: &one, Interval: &Interval{Low: 0.6, High: 1}, IntervalRule: IntervalCases, Passed: 9, Graded: 9},
			Run: RateStats{PassRate: &half, Interval: &Interval{Low: 0.3, High: 0.7}, IntervalRule: IntervalClustered, Passed: 4, Graded: 8}},
	}}
	var b strings.Builder
	if err := c.WriteTextWidth(&b, 80); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "100.0% [60.0–100.0]"+casesMark) || strings.Contains(out, "50.0% [30.0–70.0]"+casesMark) || strings.Count(out, "("+casesMark+" ") != 1 {
		t.Errorf("WriteTextWidth(a cases interval, a clustered one) =\n%s\nwant only the cases interval marked and the legend once", out)
	}
	g := GradeSetComparison{Variants: []GradeSetChange{{Variant: "all", Base: c.Variants[0].Base, Grades: c.Variants[0].Run}}}
	b.Reset()
	if err := g.WriteTextWidth(&b, 80); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, casesMark) || strings.Count(out, "("+casesMark+" ") != 1 {
		t.Errorf("grade-set comparison =\n%s\nwant the cases interval marked and explained", out)
	}
}
