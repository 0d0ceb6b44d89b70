package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/engine/report"
)

// defaultMaxErrored is --max-errored's default: a variant with more than a
// tenth of its trials errored or skipped makes mst run exit 4, because its
// pass rate then stands on too little of what was asked.
const defaultMaxErrored = "10%"

// errorLimit is a parsed --max-errored: a share of a variant's trials
// (share, 0..1) or a count of trials.
type errorLimit struct {
	share   float64
	count   int
	isCount bool
	text    string
}

// parseErrorLimit reads --max-errored: "10%", "0.1" or "3".
func parseErrorLimit(s string) (errorLimit, error) {
	l := errorLimit{text: s}
	bad := fmt.Errorf("--max-errored %q: write a share of each variant's trials (10%%, 0.25) or a number of trials (3)", s)
	switch t := strings.TrimSpace(s); {
	case strings.HasSuffix(t, "%"):
		v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
			return l, bad
		}
		l.share = v / 100
	case strings.Contains(t, "."):
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 1 {
			return l, bad
		}
		l.share = v
	default:
		v, err := strconv.Atoi(t)
		if err != nil || v < 0 {
			return l, bad
		}
		l.count, l.isCount = v, true
	}
	return l, nil
}

// exceeded reports whether bad of n trials is over the limit.
func (l errorLimit) exceeded(bad, n int) bool {
	if bad == 0 || n == 0 {
		return false
	}
	if l.isCount {
		return bad > l.count
	}
	return float64(bad) > l.share*float64(n)+1e-9
}

// unanswered lists, one line each, the variants whose results cannot be
// trusted: no trial of theirs that ended could be graded, or more of their
// trials errored or were skipped than the limit allows. A variant with no
// trial that ended (an interrupted run) is left to the partial verdict.
func unanswered(r report.Report, limit errorLimit) []string {
	var out []string
	for _, v := range r.Variants {
		o := v.Outcomes
		if v.Trials-o.Cancelled == 0 {
			continue // nothing ended: the partial verdict says so
		}
		gradable := o.Answered + o.NoAnswer + o.TimedOut
		bad := o.Errored + o.Skipped
		switch {
		case gradable == 0:
			out = append(out, fmt.Sprintf("variant %s: none of its %d trials could be graded (%s)", v.Variant, v.Trials, outcomeWords(o)))
		case limit.exceeded(bad, v.Trials):
			out = append(out, fmt.Sprintf("variant %s: %d of its %d trials errored or were skipped, more than --max-errored %s allows (%s)", v.Variant, bad, v.Trials, limit.text, outcomeWords(o)))
		}
	}
	return out
}

// outcomeWords says how a variant's trials ended: "3 errored, 39 skipped".
func outcomeWords(o report.Outcomes) string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(o.Answered, "answered")
	add(o.NoAnswer, "without an answer")
	add(o.TimedOut, "timed out")
	add(o.Errored, "errored")
	add(o.Skipped, "skipped")
	add(o.Cancelled, "cancelled")
	add(o.Other, "with an unknown outcome")
	return strings.Join(parts, ", ")
}
