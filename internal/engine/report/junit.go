package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// JUnit XML, in the shape Apache Ant's JUnit task writes and every CI
// system reads (the schema MST's tests hold it to: testdata/junit/junit.xsd).
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string          `xml:"name,attr"`
	Package   string          `xml:"package,attr"`
	ID        int             `xml:"id,attr"`
	Timestamp string          `xml:"timestamp,attr"`
	Hostname  string          `xml:"hostname,attr"`
	Tests     int             `xml:"tests,attr"`
	Failures  int             `xml:"failures,attr"`
	Errors    int             `xml:"errors,attr"`
	Skipped   int             `xml:"skipped,attr"`
	Time      string          `xml:"time,attr"`
	Props     []junitProperty `xml:"properties>property"`
	Cases     []junitCase     `xml:"testcase"`
	SystemOut string          `xml:"system-out"`
	SystemErr string          `xml:"system-err"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitMessage `xml:"skipped"`
	Error     *junitMessage `xml:"error"`
	Failure   *junitMessage `xml:"failure"`
	// SystemOut lists what advisory judges said of the case's trials
	// when they did not pass them: output to read, never a failure.
	SystemOut string `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: one testsuite per variant
// and one testcase per case under it, named by the case id. grades are
// the run's trial grades (any order; those of other variants or cases are
// ignored); they give each failure its grader reasons.
//
// A testcase is, in this order of precedence:
//
//   - a failure when a graded trial of it failed; the message counts the
//     passes, the body lists each failed trial with its graders' reasons;
//   - an error when a trial of it errored; the message is the first
//     error's cause and message;
//   - skipped when no trial of it passed: every trial was skipped,
//     cancelled or is missing;
//   - a pass otherwise.
//
// An advisory judge (gate: false) is never a failure: a trial it did not
// pass is listed in the testcase's system-out, whatever the testcase is.
//
// Its time is the sum of its trials' durations. Text from transcripts
// (messages, reasons, ids) is kept as stored, with the characters XML
// cannot hold replaced by U+FFFD.
func (r Report) WriteJUnit(w io.Writer, grades []grade.TrialGrade) error {
	byKey := make(map[transcript.Key]grade.TrialGrade, len(grades))
	for _, g := range grades {
		byKey[g.Key] = g
	}
	ts := ""
	if !r.Run.Started.IsZero() {
		ts = r.Run.Started.UTC().Format("2006-01-02T15:04:05")
	} else {
		ts = "1970-01-01T00:00:00"
	}
	pkg := xmlText(junitOr(r.Run.Eval, "mst"))
	doc := junitSuites{}
	for vi, v := range r.Variants {
		s := junitSuite{
			Name: xmlText(junitOr(v.Variant, "(unnamed)")), Package: pkg, ID: vi,
			Timestamp: ts, Hostname: "localhost",
			Props: []junitProperty{
				{Name: "mst.run", Value: xmlText(r.Run.ID)},
				{Name: "mst.eval", Value: xmlText(r.Run.Eval)},
				{Name: "mst.client", Value: xmlText(v.Client)},
				{Name: "mst.model", Value: xmlText(v.Model)},
				{Name: "mst.passRate", Value: junitRate(v.PassRate)},
			},
		}
		s.Props = append(s.Props, junitScoreProps(v)...)
		var suiteMs float64
		for _, row := range r.Cases {
			c := junitCase{Name: xmlText(junitOr(row.Case, "(no id)")), Classname: pkg + "." + s.Name}
			var ms float64
			var failed, errored, advisory []string
			passed := 0
			firstErr := ""
			for i := 1; i <= r.Run.TrialsPerCase; i++ {
				g, ok := byKey[transcript.Key{Case: row.Case, Variant: v.Variant, Trial: i}]
				if !ok {
					continue
				}
				ms += g.Trial.DurationMs
				for _, line := range advisoryLines(g) {
					advisory = append(advisory, fmt.Sprintf("trial %d: %s", i, line))
				}
				switch {
				case g.Graded && g.Passed:
					passed++
				case g.Graded:
					failed = append(failed, fmt.Sprintf("trial %d: %s", i, failureReasons(g)))
				case g.Trial.Status == transcript.Errored:
					msg := "errored"
					if g.Trial.Cause != "" {
						msg += " (" + g.Trial.Cause + ")"
					}
					if g.Trial.Detail != "" {
						msg += ": " + g.Trial.Detail
					}
					errored = append(errored, fmt.Sprintf("trial %d: %s", i, msg))
					if firstErr == "" {
						firstErr = msg
					}
				}
			}
			cell := variantCell(row, v.Variant)
			switch {
			case len(failed) > 0:
				body := strings.Join(failed, "\n")
				if len(errored) > 0 {
					body += "\n" + strings.Join(errored, "\n")
				}
				c.Failure = &junitMessage{
					Message: xmlText(fmt.Sprintf("%d of %d graded trials passed", cell.Passed, cell.Graded)),
					Type:    "mst.failed", Body: xmlText(body),
				}
				s.Failures++
			case len(errored) > 0:
				c.Error = &junitMessage{Message: xmlText(firstErr), Type: "mst.errored", Body: xmlText(strings.Join(errored, "\n"))}
				s.Errors++
			case passed == 0:
				c.Skipped = &junitMessage{Message: xmlText(junitNotRun(cell))}
				s.Skipped++
			}
			if len(advisory) > 0 {
				c.SystemOut = xmlText(AdvisoryNote + ".\n" + strings.Join(advisory, "\n"))
			}
			c.Time = junitSeconds(ms)
			suiteMs += ms
			s.Tests++
			s.Cases = append(s.Cases, c)
		}
		s.Time = junitSeconds(suiteMs)
		doc.Suites = append(doc.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("writing JUnit XML: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("writing JUnit XML: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("writing JUnit XML: %w", err)
	}
	return nil
}

// junitScoreProps are the properties of a variant's pass@k and pass^k
// (mst.passAtK.K, mst.passHatK.K for k = 1 … trials per case) and of its
// judges (mst.judge.NAME.mean, .ciLow, .ciHigh, .judged, .passed,
// .errored, .hash). A number that is undefined (no case has k graded
// trials, no score, fewer than two cases for an interval) has no
// property. NAME is the judge's grader name, followed by " #" and the
// start of its hash when two judges of the variant share a name.
func junitScoreProps(v VariantStats) []junitProperty {
	var out []junitProperty
	num := func(name string, x *float64) {
		if x != nil && !math.IsNaN(*x) && !math.IsInf(*x, 0) {
			out = append(out, junitProperty{Name: name, Value: junitRate(x)})
		}
	}
	for _, p := range v.PassK {
		num("mst.passAtK."+strconv.Itoa(p.K), p.PassAt)
	}
	for _, p := range v.PassK {
		num("mst.passHatK."+strconv.Itoa(p.K), p.PassHat)
	}
	for _, j := range v.Judges {
		shared, short := false, false
		for _, o := range v.Judges {
			if o.Grader == j.Grader && o.Hash != j.Hash {
				shared = true
				short = short || strings.HasPrefix(o.Hash, j.Hash[:min(8, len(j.Hash))])
			}
		}
		name := j.Grader
		switch {
		case short:
			name += " #" + j.Hash
		case shared:
			name = judgeLabel(j)
		}
		pre := "mst.judge." + xmlText(junitOr(name, "(unnamed)")) + "."
		num(pre+"mean", j.Mean)
		if j.Interval != nil {
			num(pre+"ciLow", &j.Interval.Low)
			num(pre+"ciHigh", &j.Interval.High)
		}
		out = append(out,
			junitProperty{Name: pre + "judged", Value: strconv.Itoa(j.Scored)},
			junitProperty{Name: pre + "passed", Value: strconv.Itoa(j.Passed)},
			junitProperty{Name: pre + "errored", Value: strconv.Itoa(j.Errored)},
			junitProperty{Name: pre + "hash", Value: xmlText(j.Hash)})
	}
	return out
}

// failureReasons says why a graded trial failed, in one line.
func failureReasons(g grade.TrialGrade) string { return strings.Join(trialReasons(g), "; ") }

// variantCell is row's cell of variant v.
func variantCell(row CaseRow, v string) CaseCell {
	for _, c := range row.Variants {
		if c.Variant == v {
			return c
		}
	}
	return CaseCell{}
}

// notRun says why a case with no passing trial and no failure or error
// has no result.
func junitNotRun(c CaseCell) string {
	switch n := c.Planned - c.Trials; {
	case n == c.Planned:
		return "no trial ran (all missing)"
	case n > 0:
		return fmt.Sprintf("not graded: %d skipped or cancelled, %d missing", c.Trials-c.Graded, n)
	}
	return fmt.Sprintf("not graded: %d skipped or cancelled", c.Trials-c.Graded)
}

func junitRate(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func junitSeconds(ms float64) string { return strconv.FormatFloat(ms/1000, 'f', 3, 64) }

func junitOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// xmlText replaces what XML 1.0 cannot hold (most control characters,
// invalid UTF-8) with U+FFFD; encoding/xml escapes the rest.
func xmlText(s string) string {
	ok := true
	for _, r := range s {
		if !xmlChar(r) {
			ok = false
			break
		}
	}
	if ok && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !xmlChar(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

func xmlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' ||
		r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}
