package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mst-eval/mst/transcript"
)

// WriteText writes the report for a terminal: a header, the variant table,
// the trials that were not graded grouped by cause, pass@k and pass^k, the
// per-case matrix, the comparisons in words, notes on what is missing, and
// a footer naming the methods. Columns are aligned with spaces; messages
// from transcripts are quoted, and ids and names have control characters
// escaped.
func (r Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	r.writeHeader(ew)
	r.writeVariants(ew)
	r.writeErrorGroups(ew)
	r.writePassK(ew)
	r.writeCases(ew)
	r.writeComparisons(ew)
	r.writeNotes(ew)
	r.writeMethods(ew)
	return ew.err
}

// text is dataset or config text (an id, a name) as the report prints it:
// with control characters escaped, so that it cannot move the cursor,
// clear the screen or break the table's columns with a tab.
func text(s string) string { return transcript.Printable(s) }

// errWriter keeps the first write error so the rendering code can write
// without checking each call.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("writing report: %w", err)
	}
	return n, nil
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func (r Report) writeHeader(w io.Writer) {
	tw := newTable(w)
	eval := r.Run.Eval
	if eval == "" {
		eval = "(unnamed)"
	}
	fmt.Fprintf(tw, "Eval\t%s\n", text(eval))
	run := text(r.Run.ID)
	if run == "" {
		run = "(no id)"
	}
	if r.Run.Collect != "" {
		run += " (" + text(r.Run.Collect) + ")"
	}
	fmt.Fprintf(tw, "Run\t%s\n", run)
	fmt.Fprintf(tw, "Plan\t%s × %s × %s = %s\n",
		plural(len(r.Variants), "variant"), plural(len(r.Cases), "case"),
		plural(r.Run.TrialsPerCase, "trial"), plural(r.Counts.Planned, "trial"))
	fmt.Fprintf(tw, "Outcomes\t%s\n", outcomeSummary(r.Counts))
	tw.Flush()
	fmt.Fprintln(w)
}

// outcomeSummary lists the outcome counts that are not zero, answered
// always.
func outcomeSummary(c transcript.Counts) string {
	parts := []string{fmt.Sprintf("%d answered", c.Answered)}
	for _, p := range []struct {
		n    int
		what string
	}{
		{c.NoAnswer, "no answer"},
		{c.TimedOut, "timed out"},
		{c.Errored, "errored"},
		{c.Cancelled, "cancelled"},
		{c.Skipped, "skipped"},
		{c.Missing, "missing"},
	} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}

func (r Report) writeVariants(w io.Writer) {
	if len(r.Variants) == 0 {
		fmt.Fprintln(w, "No variants.")
		fmt.Fprintln(w)
		return
	}
	// The SKIPPED column shows only when a trial was skipped: most runs
	// have none.
	skipped := false
	for _, v := range r.Variants {
		skipped = skipped || v.Outcomes.Skipped > 0
	}
	tw := newTable(w)
	head := "VARIANT\tCLIENT\tMODEL\tPASS RATE [95% CI]\tPASSED\tANSWERED\tNO ANSWER\tTIMED OUT\tERRORED\tCANCELLED\t"
	if skipped {
		head += "SKIPPED\t"
	}
	fmt.Fprintln(tw, head+"MISSING\tTOKENS IN/OUT\tLATENCY P50/P95")
	for _, v := range r.Variants {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%d\t%d\t%d\t",
			text(v.Variant), text(orDash(v.Client)), text(orDash(v.Model)),
			passRate(v.PassRate, v.Interval), v.Passed, v.Graded,
			v.Outcomes.Answered, v.Outcomes.NoAnswer, v.Outcomes.TimedOut,
			v.Outcomes.Errored, v.Outcomes.Cancelled)
		if skipped {
			fmt.Fprintf(tw, "%d\t", v.Outcomes.Skipped)
		}
		fmt.Fprintf(tw, "%d\t%s/%s\t%s/%s\n", v.Missing,
			tokens(v.Tokens.MeanInput), tokens(v.Tokens.MeanOutput),
			millis(v.LatencyMs.P50), millis(v.LatencyMs.P95))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// writeErrorGroups lists, under the variant table, the trials that errored
// or were skipped, one line per variant and cause, with the first message.
func (r Report) writeErrorGroups(w io.Writer) {
	some := false
	for _, v := range r.Variants {
		some = some || len(v.ErrorGroups) > 0
	}
	if !some {
		return
	}
	fmt.Fprintln(w, "Not graded:")
	tw := newTable(w)
	for _, v := range r.Variants {
		for _, g := range v.ErrorGroups {
			what := fmt.Sprintf("%d %s", g.Count, text(g.Status))
			switch {
			case g.Cause != "":
				what += " (" + text(g.Cause) + ")"
			case g.Status == transcript.Errored:
				what += " (no cause)"
			}
			msg := "no message"
			if g.Detail != "" {
				msg = strconv.Quote(g.Detail)
			}
			fmt.Fprintf(tw, "  %s\t%s\tfirst %s #%d: %s\n", text(v.Variant), what, text(g.First.Case), g.First.Trial, msg)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// writePassK shows pass@k and pass^k of every variant for k = 2 … trials
// per case (pass@1 and pass^1 are the mean per-case pass fraction, shown
// once as PASS@1). Nothing is written with one trial per case.
func (r Report) writePassK(w io.Writer) {
	k := r.Run.TrialsPerCase
	if k < 2 || len(r.Variants) == 0 {
		return
	}
	head := []string{"VARIANT", "PASS@1"}
	for j := 2; j <= k; j++ {
		head = append(head, fmt.Sprintf("PASS@%d", j))
	}
	for j := 2; j <= k; j++ {
		head = append(head, fmt.Sprintf("PASS^%d", j))
	}
	tw := newTable(w)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	fewer := false
	for _, v := range r.Variants {
		all := 0
		if len(v.PassK) > 0 {
			all = v.PassK[0].Cases
		}
		cell := func(x *float64, cases int) string {
			if x == nil {
				return "–"
			}
			s := fmt.Sprintf("%.1f%%", *x*100)
			if cases < all {
				s += fmt.Sprintf(" (%d)", cases)
				fewer = true
			}
			return s
		}
		line := []string{text(v.Variant)}
		for _, p := range v.PassK {
			line = append(line, cell(p.PassAt, p.Cases))
		}
		for _, p := range v.PassK[min(1, len(v.PassK)):] {
			line = append(line, cell(p.PassHat, p.Cases))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	tw.Flush()
	legend := "pass@k: at least one of k trials of a case passes; pass^k: all k pass; averaged over cases"
	if fewer {
		legend += "; (n): only n cases have k graded trials"
	}
	fmt.Fprintf(w, "(%s)\n\n", legend)
}

func (r Report) writeCases(w io.Writer) {
	if len(r.Cases) == 0 || len(r.Variants) == 0 {
		return
	}
	tw := newTable(w)
	head := []string{"  CASE"}
	for _, v := range r.Variants {
		head = append(head, text(v.Variant))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	anyDiffers, anyIncomplete := false, false
	for _, c := range r.Cases {
		mark := "  "
		switch {
		case c.Differs:
			mark, anyDiffers = "* ", true
		case !c.Complete:
			mark, anyIncomplete = "? ", true
		}
		line := []string{mark + text(c.Case)}
		for _, cell := range c.Variants {
			line = append(line, cellText(cell))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	tw.Flush()
	var legend []string
	if anyDiffers {
		legend = append(legend, "* the variants differ")
	}
	if anyIncomplete {
		legend = append(legend, "? trials missing, left out of pass rates")
	}
	legend = append(legend, "cells are passed/graded")
	fmt.Fprintf(w, "(%s)\n\n", strings.Join(legend, "; "))
}

// cellText shows one case under one variant: "2/3", then the trials that
// were not graded or are missing.
func cellText(c CaseCell) string {
	s := fmt.Sprintf("%d/%d", c.Passed, c.Graded)
	if n := c.Trials - c.Graded; n > 0 {
		s += fmt.Sprintf(" +%d not graded", n)
	}
	if n := c.Planned - c.Trials; n > 0 {
		s += fmt.Sprintf(" +%d missing", n)
	}
	return s
}

func (r Report) writeComparisons(w io.Writer) {
	if len(r.Comparisons) == 0 {
		return
	}
	for _, c := range r.Comparisons {
		fmt.Fprintln(w, comparisonText(c))
	}
	fmt.Fprintln(w)
}

// comparisonText says in one line how B did against A.
func comparisonText(c Comparison) string {
	c.A, c.B = text(c.A), text(c.B)
	s := c.A + " vs " + c.B + ": "
	if c.Cases == 0 {
		return s + "no complete case with graded trials under both"
	}
	switch {
	case c.BBetter == 0 && c.ABetter == 0:
		s += fmt.Sprintf("same result on all %s", plural(c.Cases, "case"))
	case c.ABetter == 0:
		s += fmt.Sprintf("%s passes more often on %d of %s", c.B, c.BBetter, plural(c.Cases, "case"))
	case c.BBetter == 0:
		s += fmt.Sprintf("%s passes more often on %d of %s", c.A, c.ABetter, plural(c.Cases, "case"))
	default:
		s += fmt.Sprintf("%s passes more often on %d of %s, %s on %d", c.B, c.BBetter, plural(c.Cases, "case"), c.A, c.ABetter)
	}
	// Name the direction of the difference: it is negative when A wins.
	s += fmt.Sprintf(" (mean %s−%s %s, 95%% CI %s … %s), sign test %s",
		c.B, c.A, signed(*c.MeanDifference), signed(c.Interval.Low), signed(c.Interval.High), pValue(*c.SignTestP))
	if c.Unpaired > 0 {
		s += fmt.Sprintf("; %s left out, no graded trial under one of them", plural(c.Unpaired, "case"))
	}
	return s
}

func (r Report) writeNotes(w io.Writer) {
	var notes []string
	if r.Run.Collect == transcript.CollectRunning {
		notes = append(notes, "the run is still collecting; these numbers will change")
	}
	if r.Counts.Missing > 0 || r.IncompleteCases > 0 {
		var parts []string
		if r.Counts.Missing > 0 {
			parts = append(parts, plural(r.Counts.Missing, "trial")+" missing")
		}
		if r.IncompleteCases > 0 {
			parts = append(parts, plural(r.IncompleteCases, "case")+" left out of pass rates")
		}
		if r.Run.Collect != transcript.CollectRunning {
			// The command itself, with the run's folder, is mst run's to
			// print: a report does not know where it was read from.
			parts = append(parts, "mst run --resume runs what is left")
		}
		notes = append(notes, strings.Join(parts, "; "))
	}
	if n := r.Counts.Errored + r.Counts.Cancelled + r.Counts.Skipped; n > 0 {
		what := "errored or cancelled"
		if r.Counts.Skipped > 0 {
			what = "errored, cancelled or skipped"
		}
		notes = append(notes, fmt.Sprintf("%s %s: not counted as passes or failures", plural(n, "trial"), what))
	}
	if r.Ignored > 0 {
		notes = append(notes, fmt.Sprintf("%s outside the plan or repeated, ignored", plural(r.Ignored, "transcript")))
	}
	if r.Run.Note != "" {
		notes = append(notes, r.Run.Note)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
}

// writeMethods ends the report with how its numbers are computed
// (docs/statistics.md says it in full).
func (r Report) writeMethods(w io.Writer) {
	if len(r.Variants) == 0 {
		return
	}
	fmt.Fprintln(w, "Method: only graded trials of complete cases count; 95% CI: Wilson on effective trials (graded ÷ CR1 design effect, clustered by case).")
	if len(r.Comparisons) > 0 {
		fmt.Fprintf(w, "Comparisons: paired by case; percentile bootstrap of the mean difference (%d resamples, fixed seed); exact two-sided sign test.\n", bootstrapResamples)
	}
}

// plural writes a count with its noun: "1 case", "2 cases".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// passRate shows a rate with its interval: "70.0% [48.1–85.5]".
func passRate(rate *float64, iv *Interval) string {
	if rate == nil {
		return "–"
	}
	s := fmt.Sprintf("%.1f%%", *rate*100)
	if iv != nil {
		s += fmt.Sprintf(" [%.1f–%.1f]", iv.Low*100, iv.High*100)
	}
	return s
}

// tokens shows a token count compactly: 950, 1.2k, 3.4M.
func tokens(n *float64) string {
	if n == nil {
		return "–"
	}
	v := math.Round(*n)
	switch {
	case v < 1000:
		return fmt.Sprintf("%.0f", v)
	case v < 999_950:
		return fmt.Sprintf("%.1fk", v/1000)
	default:
		return fmt.Sprintf("%.1fM", v/1_000_000)
	}
}

// millis shows a duration in milliseconds readably: 850ms, 2.1s, 3m05s.
func millis(ms *float64) string {
	if ms == nil {
		return "–"
	}
	v := *ms
	switch {
	case v < 999.5:
		return fmt.Sprintf("%.0fms", v)
	case v < 59_950:
		return fmt.Sprintf("%.1fs", v/1000)
	default:
		s := int(math.Round(v / 1000))
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
}

// signed shows a difference with its sign: +0.60, -0.25, +0.00.
func signed(x float64) string {
	s := fmt.Sprintf("%+.2f", x)
	if s == "-0.00" {
		s = "+0.00"
	}
	return s
}

// pValue shows a p-value with three decimals, or as an upper bound when it
// rounds to zero: "p=0.031", "p<0.001".
func pValue(p float64) string {
	if p < 0.0005 {
		return "p<0.001"
	}
	return fmt.Sprintf("p=%.3f", p)
}
