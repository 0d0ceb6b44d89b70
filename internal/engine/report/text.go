package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// WriteText writes the report for a terminal: a header, the variant table,
// the trials that were not graded grouped by cause, pass@k and pass^k, the
// per-case matrix, the comparisons in words, notes on what is missing, and
// a footer naming the methods. Columns are aligned with spaces; messages
// from transcripts are quoted, and ids and names have control characters
// escaped. It sets no width limit: WriteTextWidth fits a terminal.
func (r Report) WriteText(w io.Writer) error { return r.WriteTextWidth(w, 0) }

// WriteTextWidth writes the report as WriteText does, within width
// characters a line (0: no limit): tables leave out their least needed
// columns and shorten long names with "…", and sentences wrap. Ids in the
// header are never shortened, so a line holding one may be longer.
func (r Report) WriteTextWidth(w io.Writer, width int) error {
	ew := &errWriter{w: w}
	r.writeHeader(ew, width)
	r.writeGrades(ew) // judges.go
	r.writeVariants(ew, width)
	r.writeErrorGroups(ew, width)
	r.writePassK(ew, width)
	r.writeJudges(ew, width) // judges.go
	r.writeCases(ew, width)
	r.writeComparisons(ew, width)
	r.writeNotes(ew, width)
	r.writeMethods(ew, width)
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

func (r Report) writeHeader(w io.Writer, width int) {
	eval := r.Run.Eval
	if eval == "" {
		eval = "(unnamed)"
	}
	run := text(r.Run.ID)
	if run == "" {
		run = "(no id)"
	}
	if r.Run.Collect != "" {
		run += " (" + text(r.Run.Collect) + ")"
	}
	const indent = "          "
	lines := [][2]string{
		{"Eval", text(eval)},
		{"Run", run},
		{"Plan", fmt.Sprintf("%s × %s × %s = %s",
			plural(len(r.Variants), "variant"), plural(len(r.Cases), "case"),
			plural(r.Run.TrialsPerCase, "trial"), plural(r.Counts.Planned, "trial"))},
	}
	if n := len(r.Run.ShardTrials); n > 1 {
		lines = append(lines, [2]string{"Shards", shardsText(r.Run.ShardTrials)})
	}
	lines = append(lines, [2]string{"Outcomes", outcomeSummary(r.Counts)})
	for _, l := range lines {
		room := 0
		if width > 0 {
			room = max(width-len(indent), 1)
		}
		value := strings.ReplaceAll(Wrap(l[1], room, ""), "\n", "\n"+indent)
		fmt.Fprintf(w, "%-8s  %s\n", l[0], value)
	}
	fmt.Fprintln(w)
}

// shardsText says how many shards a run had and how many trials each was
// given: "4 (trials per shard 2/16/8/2)".
func shardsText(trials []int) string {
	counts := make([]string, len(trials))
	for i, n := range trials {
		counts[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("%d (trials per shard %s)", len(trials), strings.Join(counts, "/"))
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

func (r Report) writeVariants(w io.Writer, width int) {
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
	// On a narrow terminal the outcome columns that are all zero go first,
	// then tokens and latency, then client and model.
	cols := []Column{
		{Head: "VARIANT", Shrink: true}, {Head: "CLIENT", Drop: 9, Shrink: true}, {Head: "MODEL", Drop: 10, Shrink: true},
		{Head: "PASS RATE [95% CI]"}, {Head: "PASSED"},
		{Head: "ANSWERED", Drop: 5}, {Head: "NO ANSWER", Drop: 2}, {Head: "TIMED OUT", Drop: 3},
		{Head: "ERRORED", Drop: 11}, {Head: "CANCELLED", Drop: 4},
	}
	if skipped {
		cols = append(cols, Column{Head: "SKIPPED", Drop: 6})
	}
	cols = append(cols, Column{Head: "MISSING", Drop: 12}, Column{Head: "TOKENS IN/OUT", Drop: 7}, Column{Head: "LATENCY P50/P95", Drop: 8})
	t := Table{Columns: cols}
	marked := false
	for _, v := range r.Variants {
		rate := passRate(v.PassRate, v.Interval)
		if v.IntervalRule == IntervalCases {
			rate += casesMark
			marked = true
		}
		row := []string{text(v.Variant), text(orDash(v.Client)), text(orDash(v.Model)),
			rate, fmt.Sprintf("%d/%d", v.Passed, v.Graded),
			fmt.Sprint(v.Outcomes.Answered), fmt.Sprint(v.Outcomes.NoAnswer), fmt.Sprint(v.Outcomes.TimedOut),
			fmt.Sprint(v.Outcomes.Errored), fmt.Sprint(v.Outcomes.Cancelled)}
		if skipped {
			row = append(row, fmt.Sprint(v.Outcomes.Skipped))
		}
		row = append(row, fmt.Sprint(v.Missing),
			tokens(v.Tokens.MeanInput)+"/"+tokens(v.Tokens.MeanOutput),
			millis(v.LatencyMs.P50)+"/"+millis(v.LatencyMs.P95))
		t.Rows = append(t.Rows, row)
	}
	if n := t.Write(w, width); n > 0 {
		fmt.Fprintln(w, Wrap(fmt.Sprintf("(%s left out to fit %d columns; mst report --json has them all)", plural(n, "column"), width), width, " "))
	}
	if marked {
		fmt.Fprintln(w, Wrap("("+casesMark+" "+casesLegend+")", width, " "))
	}
	fmt.Fprintln(w)
}

// casesMark follows a pass-rate interval made by the IntervalCases rule,
// in every format; casesLegend explains it.
const (
	casesMark   = "†"
	casesLegend = "every trial passed, every one failed, or there is one case: nothing measures how alike a case's trials are, so the CI counts each case as one trial"
)

// writeErrorGroups lists, under the variant table, the trials that errored
// or were skipped, one line per variant and cause, with the first message.
func (r Report) writeErrorGroups(w io.Writer, width int) {
	some := false
	for _, v := range r.Variants {
		some = some || len(v.ErrorGroups) > 0
	}
	if !some {
		return
	}
	fmt.Fprintln(w, "Not graded:")
	t := Table{Columns: []Column{{Shrink: true}, {}, {Shrink: true}}, Indent: "  "}
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
			t.Rows = append(t.Rows, []string{text(v.Variant), what, fmt.Sprintf("first %s #%d: %s", text(g.First.Case), g.First.Trial, msg)})
		}
	}
	t.Write(w, width)
	fmt.Fprintln(w)
}

// writePassK shows pass@k and pass^k of every variant for k = 2 … trials
// per case (pass@1 and pass^1 are the mean per-case pass fraction, shown
// once as PASS@1). Nothing is written with one trial per case.
func (r Report) writePassK(w io.Writer, width int) {
	k := r.Run.TrialsPerCase
	if k < 2 || len(r.Variants) == 0 {
		return
	}
	// On a narrow terminal the columns of the largest k go first, pass^k
	// before pass@k.
	cols := []Column{{Head: "VARIANT", Shrink: true}, {Head: "PASS@1"}}
	for j := 2; j <= k; j++ {
		cols = append(cols, Column{Head: fmt.Sprintf("PASS@%d", j), Drop: 2 * (k - j + 1)})
	}
	for j := 2; j <= k; j++ {
		cols = append(cols, Column{Head: fmt.Sprintf("PASS^%d", j), Drop: 2*(k-j) + 1})
	}
	t := Table{Columns: cols}
	fewer := false
	for _, v := range r.Variants {
		cells, f := passKCells(v, k)
		fewer = fewer || f
		t.Rows = append(t.Rows, append([]string{text(v.Variant)}, cells...))
	}
	dropped := t.Write(w, width)
	legend := "pass@k: at least one of k trials of a case passes; pass^k: all k pass; averaged over cases"
	if fewer {
		legend += "; (n): only n cases have k graded trials"
	}
	if dropped > 0 {
		legend += fmt.Sprintf("; %s left out to fit %d columns", plural(dropped, "column"), width)
	}
	fmt.Fprintf(w, "%s\n\n", Wrap("("+legend+")", width, " "))
}

// passKCells are the cells of v in the pass@k tables of the text and
// Markdown reports, k the trials per case: pass@1 … pass@k, then pass^2 …
// pass^k; "–" where no case has the trials (or v has no entry for that
// k), and "(n)" after a rate that only n cases have, fewer than pass@1's.
// fewer says whether a cell has "(n)".
func passKCells(v VariantStats, k int) (cells []string, fewer bool) {
	all := 0
	if len(v.PassK) > 0 {
		all = v.PassK[0].Cases
	}
	cell := func(j int, hat bool) string {
		if j >= len(v.PassK) {
			return "–"
		}
		p := v.PassK[j]
		x := p.PassAt
		if hat {
			x = p.PassHat
		}
		if x == nil {
			return "–"
		}
		s := fmt.Sprintf("%.1f%%", *x*100)
		if p.Cases < all {
			s += fmt.Sprintf(" (%d)", p.Cases)
			fewer = true
		}
		return s
	}
	for j := range k {
		cells = append(cells, cell(j, false))
	}
	for j := 1; j < k; j++ {
		cells = append(cells, cell(j, true))
	}
	return cells, fewer
}

// writeCases writes the case × variant matrix. When the variants do not
// fit the width side by side, the matrix is written in parts, each with
// as many variants as fit.
func (r Report) writeCases(w io.Writer, width int) {
	if len(r.Cases) == 0 || len(r.Variants) == 0 {
		return
	}
	anyDiffers, anyIncomplete := false, false
	caseCells := make([]string, len(r.Cases))
	caseW := len("  CASE")
	for i, c := range r.Cases {
		mark := "  "
		switch {
		case c.Differs:
			mark, anyDiffers = "* ", true
		case !c.Complete:
			mark, anyIncomplete = "? ", true
		}
		caseCells[i] = mark + text(c.Case)
		caseW = max(caseW, utf8.RuneCountInString(caseCells[i]))
	}
	// The case column keeps at least 18 characters when it must shrink.
	colW := make([]int, len(r.Variants))
	for vi, v := range r.Variants {
		colW[vi] = utf8.RuneCountInString(text(v.Variant))
		for _, c := range r.Cases {
			colW[vi] = max(colW[vi], utf8.RuneCountInString(cellText(c.Variants[vi])))
		}
	}
	var parts [][]int
	room := width - min(caseW, 18)
	for vi := range r.Variants {
		last := len(parts) - 1
		if width > 0 && last >= 0 {
			used := 0
			for _, j := range parts[last] {
				used += colW[j] + gap
			}
			if used+colW[vi]+gap <= room {
				parts[last] = append(parts[last], vi)
				continue
			}
		} else if last >= 0 {
			parts[last] = append(parts[last], vi)
			continue
		}
		parts = append(parts, []int{vi})
	}
	for pi, part := range parts {
		if pi > 0 {
			fmt.Fprintln(w)
		}
		cols := []Column{{Head: "  CASE", Shrink: true}}
		for _, vi := range part {
			cols = append(cols, Column{Head: text(r.Variants[vi].Variant), Shrink: true})
		}
		t := Table{Columns: cols}
		for ci, c := range r.Cases {
			row := []string{caseCells[ci]}
			for _, vi := range part {
				row = append(row, cellText(c.Variants[vi]))
			}
			t.Rows = append(t.Rows, row)
		}
		t.Write(w, width)
	}
	var legend []string
	if anyDiffers {
		legend = append(legend, "* the variants differ")
	}
	if anyIncomplete {
		legend = append(legend, "? trials missing, left out of pass rates")
	}
	legend = append(legend, "cells are passed/graded")
	fmt.Fprintf(w, "%s\n\n", Wrap("("+strings.Join(legend, "; ")+")", width, " "))
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

func (r Report) writeComparisons(w io.Writer, width int) {
	if len(r.Comparisons) == 0 {
		return
	}
	for _, c := range r.Comparisons {
		fmt.Fprintln(w, Wrap(comparisonText(c), width, "  "))
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

func (r Report) writeNotes(w io.Writer, width int) {
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
		fmt.Fprintln(w, Wrap("Note: "+n, width, "  "))
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
}

// writeMethods ends the report with how its numbers are computed
// (docs/statistics.md says it in full).
func (r Report) writeMethods(w io.Writer, width int) {
	if len(r.Variants) == 0 {
		return
	}
	fmt.Fprintln(w, Wrap("Method: only graded trials of complete cases count; 95% CI: Wilson with continuity correction on effective trials (graded ÷ CR1 design effect, clustered by case, for cases − 1 degrees of freedom).", width, "  "))
	if len(r.Comparisons) > 0 {
		fmt.Fprintln(w, Wrap(fmt.Sprintf("Comparisons: paired by case; percentile bootstrap of the mean difference (%d resamples, fixed seed); exact two-sided sign test.", bootstrapResamples), width, "  "))
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

// WriteFailures lists the graded trials that failed, variant by variant
// in the report's order and case by case in dataset order, each with the
// reasons its graders gave, within width characters a line (0: no
// limit). grades are the run's trial grades, in any order. Reasons come
// from transcripts and graders: they are escaped (transcript.Printable).
func (r Report) WriteFailures(w io.Writer, grades []grade.TrialGrade, width int) error {
	ew := &errWriter{w: w}
	byKey := make(map[transcript.Key]grade.TrialGrade, len(grades))
	for _, g := range grades {
		byKey[g.Key] = g
	}
	n, advisory := 0, false
	for _, v := range r.Variants {
		for _, c := range r.Cases {
			for i := 1; i <= r.Run.TrialsPerCase; i++ {
				g, ok := byKey[transcript.Key{Case: c.Case, Variant: v.Variant, Trial: i}]
				if !ok || !g.Graded || g.Passed {
					continue
				}
				if n == 0 {
					fmt.Fprintln(ew, "Failed trials:")
				}
				n++
				fmt.Fprintf(ew, "  %s\n", g.Key)
				for _, reason := range trialReasons(g) {
					fmt.Fprintln(ew, Wrap("    "+text(reason), width, "      "))
				}
				// Advisory judges that scored the trial low come after its
				// reasons, marked: they are not why it failed.
				for _, line := range advisoryLines(g) {
					fmt.Fprintln(ew, Wrap("    "+text(line), width, "      "))
					advisory = true
				}
			}
		}
	}
	if n == 0 {
		fmt.Fprintln(ew, "No graded trial failed.")
		return ew.err
	}
	fmt.Fprintf(ew, "\n%s\n", Wrap(plural(n, "trial")+" failed; mst show RUN VARIANT CASE TRIAL prints one in full.", width, "  "))
	if advisory {
		fmt.Fprintln(ew, Wrap(AdvisoryNote+".", width, "  "))
	}
	return ew.err
}

// trialReasons lists why a graded trial failed, one reason a line: the
// graders that decide the trial and failed it (an advisory judge is never
// a reason), and what its outcome alone failed it for.
func trialReasons(g grade.TrialGrade) []string {
	var out []string
	for _, res := range g.Results {
		if res.Passed || res.Advisory {
			continue
		}
		s := res.Grader
		if res.Detail != "" {
			s += ": " + res.Detail
		}
		out = append(out, s)
	}
	if g.Failed != "" {
		out = append(out, g.Failed)
	}
	if len(out) == 0 {
		out = append(out, "failed (no reason recorded)")
	}
	return out
}
