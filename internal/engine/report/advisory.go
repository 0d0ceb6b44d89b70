package report

import "github.com/mst-eval/mst/grade"

// The marks the text outputs (mst show, --failures) put before one
// grader's result. An advisory result (a judge with gate: false) is
// recorded and shown, and never fails a trial: one that did not pass has
// a mark of its own, never MarkFailed, and its line says "advisory".
const (
	MarkPassed    = "✓"
	MarkFailed    = "✗"
	MarkAdvisory  = "○"
	MarkNoVerdict = "!"
)

// AdvisoryNote explains MarkAdvisory where a list of results holds one.
const AdvisoryNote = MarkAdvisory + " advisory: a judge with gate: false; its verdict is recorded and does not decide whether the trial passes"

// ResultLine is one grader's result on one line: its mark, the grader's
// name, "(advisory)" when the result is advisory, and why it did not pass
// (its detail, or the error that left it without a verdict). The texts
// are as stored: the caller escapes them for where they go.
func ResultLine(r grade.Result) string {
	mark := MarkFailed
	switch {
	case r.Passed:
		mark = MarkPassed
	case r.Advisory:
		mark = MarkAdvisory
	case r.Error != "":
		mark = MarkNoVerdict
	}
	s := mark + " " + r.Grader
	if r.Advisory {
		s += " (advisory)"
	}
	why := r.Detail
	if r.Error != "" {
		why = "no verdict: " + r.Error
	}
	if why != "" {
		s += ": " + why
	}
	return s
}

// HasAdvisory reports whether any of results is advisory and did not pass.
func HasAdvisory(results []grade.Result) bool {
	for _, r := range results {
		if r.Advisory && !r.Passed {
			return true
		}
	}
	return false
}

// advisoryLines are ResultLine of each advisory result of g that did not
// pass: shown beside a failed trial's reasons, never as one of them.
func advisoryLines(g grade.TrialGrade) []string {
	var out []string
	for _, r := range g.Results {
		if r.Advisory && !r.Passed {
			out = append(out, ResultLine(r))
		}
	}
	return out
}
