package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/mst-eval/mst/transcript"
)

// Verdict is what a Markdown summary says first: whether the run's gates
// passed. Checked is false when no gate was asked for; Failed lists the
// gates that failed, one sentence each.
type Verdict struct {
	Checked bool
	Failed  []string
}

// markdownCaseRows bounds the changed cases a Markdown summary lists, so a
// pull-request comment stays short.
const markdownCaseRows = 20

// WriteMarkdown writes a short summary for a pull-request comment: the
// verdict, the variants with their pass rates and intervals, pass@k and
// pass^k when a case has more than one trial, the judges' mean scores
// when there are judges, the cases whose result differs between variants,
// and the paired comparisons. The numbers are those of the JSON report,
// rounded as the text report rounds them (rates to 0.1%, differences and
// scores to 0.01).
func (r Report) WriteMarkdown(w io.Writer, v Verdict) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "### MST report: %s\n\n", md(junitOr(r.Run.Eval, "(unnamed eval)")))
	fmt.Fprintf(ew, "%s\n\n", v.line())
	status := "complete"
	if r.Run.Collect != "" {
		status = r.Run.Collect
	}
	fmt.Fprintf(ew, "Run %s (%s): %s × %s × %s; %s.\n\n", md(junitOr(r.Run.ID, "(no id)")), md(status),
		plural(len(r.Variants), "variant"), plural(len(r.Cases), "case"), plural(r.Run.TrialsPerCase, "trial"),
		outcomeSummary(r.Counts))
	if len(r.Variants) > 0 {
		fmt.Fprintln(ew, "| Variant | Client | Model | Pass rate | 95% CI | Passed | Errored | Missing |")
		fmt.Fprintln(ew, "|---|---|---|---:|---:|---:|---:|---:|")
		marked := false
		for _, s := range r.Variants {
			rate, iv := "–", "–"
			if s.PassRate != nil {
				rate = fmt.Sprintf("%.1f%%", *s.PassRate*100)
				iv = fmt.Sprintf("%.1f–%.1f%%", s.Interval.Low*100, s.Interval.High*100)
			}
			if s.IntervalRule == IntervalCases {
				iv += casesMark
				marked = true
			}
			fmt.Fprintf(ew, "| %s | %s | %s | %s | %s | %d/%d | %d | %d |\n", md(s.Variant), md(orDash(s.Client)), md(orDash(s.Model)),
				rate, iv, s.Passed, s.Graded, s.Outcomes.Errored, s.Missing)
		}
		fmt.Fprintln(ew)
		if marked {
			fmt.Fprintf(ew, "%s %s.\n\n", casesMark, strings.ToUpper(casesLegend[:1])+casesLegend[1:])
		}
	}
	r.markdownPassK(ew)
	r.markdownJudges(ew)
	var differ []CaseRow
	for _, c := range r.Cases {
		if c.Differs {
			differ = append(differ, c)
		}
	}
	if len(differ) > 0 && len(r.Variants) > 1 {
		fmt.Fprintf(ew, "**Cases where the variants differ** (%d; passed/graded):\n\n", len(differ))
		head := "| Case |"
		sep := "|---|"
		for _, s := range r.Variants {
			head += " " + md(s.Variant) + " |"
			sep += "---:|"
		}
		fmt.Fprintln(ew, head)
		fmt.Fprintln(ew, sep)
		for i, c := range differ {
			if i == markdownCaseRows {
				break
			}
			line := "| " + md(c.Case) + " |"
			for _, cell := range c.Variants {
				line += fmt.Sprintf(" %d/%d |", cell.Passed, cell.Graded)
			}
			fmt.Fprintln(ew, line)
		}
		if n := len(differ) - markdownCaseRows; n > 0 {
			fmt.Fprintf(ew, "\n…and %d more (`mst report RUN` lists them all).\n", n)
		}
		fmt.Fprintln(ew)
	}
	for _, c := range r.Comparisons {
		if c.Cases == 0 {
			continue
		}
		fmt.Fprintf(ew, "- %s − %s: %s [95%% CI %s … %s], sign test %s, %d of %s better, %d worse\n",
			md(c.B), md(c.A), signed(*c.MeanDifference), signed(c.Interval.Low), signed(c.Interval.High),
			pValue(*c.SignTestP), c.BBetter, plural(c.Cases, "case"), c.ABetter)
	}
	if len(r.Comparisons) > 0 {
		fmt.Fprintln(ew)
	}
	return ew.err
}

// markdownPassK writes the table of pass@k and pass^k that the text
// report shows (writePassK): pass@1 once, then pass@k and pass^k for k = 2
// … trials per case, "–" where no case has k graded trials, and "(n)"
// after a number that only n cases have. Nothing with one trial per case.
func (r Report) markdownPassK(w io.Writer) {
	k := r.Run.TrialsPerCase
	if k < 2 || len(r.Variants) == 0 {
		return
	}
	head, sep := "| Variant | pass@1 |", "|---|---:|"
	for j := 2; j <= k; j++ {
		head += fmt.Sprintf(" pass@%d |", j)
		sep += "---:|"
	}
	for j := 2; j <= k; j++ {
		head += fmt.Sprintf(" pass^%d |", j)
		sep += "---:|"
	}
	var rows []string
	fewer := false
	for _, v := range r.Variants {
		cells, f := passKCells(v, k) // text.go
		fewer = fewer || f
		rows = append(rows, "| "+md(v.Variant)+" | "+strings.Join(cells, " | ")+" |")
	}
	legend := "at least one of k trials of a case passes / all k pass; averaged over cases"
	if fewer {
		legend += "; (n): only n cases have k graded trials"
	}
	fmt.Fprintf(w, "**pass@k / pass^k** (%s):\n\n%s\n%s\n%s\n\n", legend, head, sep, strings.Join(rows, "\n"))
}

// markdownJudges writes the judges' mean scores per variant, as the text
// report's writeJudges does: one row per judge and variant, by judge name,
// and a sentence counting the trials no judge could grade.
func (r Report) markdownJudges(w io.Writer) {
	rows, errs := r.judgeRows() // judges.go
	if len(rows) > 0 {
		fmt.Fprintln(w, "**Judge scores** (mean with a 95% interval clustered by case, complete cases):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| Judge | Variant | Mean [95% CI] | Scale | Judged pass | Errored |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
		for _, x := range rows {
			j := x.j
			fmt.Fprintf(w, "| %s | %s | %s | %d–%d | %d/%d | %d |\n", md(judgeLabel(j)), md(x.variant), md(judgeMean(j, "–")),
				j.Scale.Min, j.Scale.Max, j.Passed, j.Scored, j.Errored)
		}
		fmt.Fprintln(w)
	}
	if errs > 0 {
		fmt.Fprintf(w, "%s could not be graded: a judge gave no verdict (they count neither as passed nor as failed; `mst grade` grades them again).\n\n", plural(errs, "trial"))
	}
}

// line is the verdict in one line.
func (v Verdict) line() string {
	switch {
	case len(v.Failed) > 0:
		items := make([]string, len(v.Failed))
		for i, f := range v.Failed {
			items[i] = md(f)
		}
		return "**Verdict: failed** ❌ " + strings.Join(items, "; ")
	case v.Checked:
		return "**Verdict: passed** ✅ every gate passed"
	}
	return "**Verdict:** no gate was set"
}

// WriteMarkdown writes the comparison for a pull-request comment: the
// verdict, each variant's pass rate in both runs with the paired
// difference, the cases that changed and the servers whose tools changed.
func (c RunComparison) WriteMarkdown(w io.Writer, v Verdict) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "### MST comparison: %s\n\n", md(junitOr(c.Run.Eval, "(unnamed eval)")))
	fmt.Fprintf(ew, "%s\n\n", v.line())
	fmt.Fprintf(ew, "Base %s, run %s.\n\n", md(junitOr(c.Base.ID, "(no id)")), md(junitOr(c.Run.ID, "(no id)")))
	if len(c.Variants) > 0 {
		fmt.Fprintln(ew, "| Variant | Base | Run | Run − base | 95% CI | Sign test | Better | Worse |")
		fmt.Fprintln(ew, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, vc := range c.Variants {
			p := vc.Paired
			diff, iv, test := pairedCells(p, vc.Worse, false, "**worse**")
			fmt.Fprintf(ew, "| %s | %s | %s | %s | %s | %s | %d | %d |\n", md(vc.Variant),
				mdRate(vc.Base.PassRate), mdRate(vc.Run.PassRate), diff, iv, test, p.BBetter, p.ABetter)
		}
		fmt.Fprintln(ew)
	}
	rows := 0
	for _, vc := range c.Variants {
		for _, pc := range sortChanged(vc.Changed) {
			if rows == 0 {
				fmt.Fprintln(ew, "**Cases that changed** (pass fraction):")
				fmt.Fprintln(ew)
				fmt.Fprintln(ew, "| Variant | Case | Base | Run |")
				fmt.Fprintln(ew, "|---|---|---:|---:|")
			}
			rows++
			if rows <= markdownCaseRows {
				fmt.Fprintf(ew, "| %s | %s | %.2f | %.2f |\n", md(vc.Variant), md(pc.Case), pc.A, pc.B)
			}
		}
	}
	if rows > markdownCaseRows {
		fmt.Fprintf(ew, "\n…and %d more (`mst compare BASE RUN` lists them all).\n", rows-markdownCaseRows)
	}
	if rows > 0 {
		fmt.Fprintln(ew)
	}
	for _, l := range c.toolLines() {
		fmt.Fprintf(ew, "- %s\n", md(l))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(ew, "- Note: %s\n", md(n))
	}
	fmt.Fprintln(ew)
	return ew.err
}

func mdRate(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", *p*100)
}

// md makes text safe in a Markdown table cell or line: control characters
// escaped (transcript.Printable), and the characters Markdown or HTML
// would read as markup backslash-escaped or written as entities.
func md(s string) string {
	s = transcript.Printable(s)
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', '`', '*', '_', '[', ']', '|', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
