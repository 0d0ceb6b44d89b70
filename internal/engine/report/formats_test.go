package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/transcript"
)

// run is a fixture: a report's input and the grades its trials came from.
type run struct {
	name   string
	in     report.Input
	grades []grade.TrialGrade
}

// makeRun builds a run of the given variants and cases with k trials
// each, whose outcomes cycle with pick(case, variant, trial) through
// passed, failed (two graders, one failing with a reason), no answer,
// errored (with a cause and message), skipped, cancelled and missing.
func makeRun(name string, variants, cases []string, k int, pick func(ci, vi, n int) int) run {
	r := newRun(name, variants, cases, k)
	for ci, c := range cases {
		for vi, v := range variants {
			for n := 1; n <= k; n++ {
				key := transcript.Key{Case: c, Variant: v, Trial: n}
				g := grade.TrialGrade{Key: key, Trial: grade.Summary{Status: transcript.Answered, DurationMs: float64(100 + ci + n)}}
				switch pick(ci, vi, n) % 7 {
				case 0, 6: // passed (more often than the rest)
					g.Graded, g.Passed = true, true
					g.Results = []grade.Result{{Grader: "toolCalled echo", Passed: true}}
				case 1:
					g.Graded = true
					g.Results = []grade.Result{{Grader: "toolCalled echo", Passed: true}, {Grader: `answerContains "x<&>"`, Passed: false, Detail: "answer does not contain " + c}}
				case 2:
					g.Trial.Status = transcript.NoAnswer
					g.Graded = true
					g.Failed = "the trial ended no-answer, without an answer; only an answered trial can pass"
				case 3:
					g.Trial.Status, g.Trial.Cause, g.Trial.Detail = transcript.Errored, transcript.CauseServer, "server crashed at "+c
				case 4:
					g.Trial.Status, g.Trial.Detail = transcript.Skipped, "variant stopped"
				case 5:
					if n == k && ci%2 == 1 {
						continue // missing
					}
					g.Trial.Status = transcript.Cancelled
				}
				r.grades = append(r.grades, g)
				r.in.Trials = append(r.in.Trials, report.NewTrial(g))
			}
		}
	}
	return r
}

// newRun is a complete run of the given variants (client api, model
// offline) and cases with k trials each, with no trials yet.
func newRun(name string, variants, cases []string, k int) run {
	r := run{name: name}
	r.in = report.Input{
		Run:   transcript.Run{ID: "run-" + name, Eval: "eval-" + name, Collect: transcript.CollectComplete, Variants: variants, Cases: len(cases), Trials: k},
		Cases: cases,
	}
	for _, v := range variants {
		r.in.Variants = append(r.in.Variants, report.VariantInfo{Name: v, Client: "api", Model: "offline"})
	}
	return r
}

// fixtures are runs of several shapes: a plain one, one with every
// outcome, one with hostile names, one with a single variant, and an
// empty one.
func fixtures() []run {
	var many []string
	for i := range 30 {
		many = append(many, fmt.Sprintf("case-%02d", i))
	}
	return []run{
		makeRun("plain", []string{"a", "b"}, []string{"c1", "c2", "c3"}, 1, func(ci, vi, n int) int { return 0 }),
		makeRun("mixed", []string{"clear", "terse", "renamed"}, many, 3, func(ci, vi, n int) int { return ci*5 + vi*3 + n }),
		makeRun("hostile", []string{"v" + hostile[0], "v|pipe*star_", "v" + hostile[2]}, hostile, 2, func(ci, vi, n int) int { return ci + vi*2 + n }),
		makeRun("one", []string{"only"}, many[:7], 2, func(ci, vi, n int) int { return ci % 3 }),
		makeRun("empty", nil, nil, 1, func(ci, vi, n int) int { return 0 }),
	}
}

// xmllint returns the path of xmllint, failing t when it is missing.
func xmllint(t *testing.T) string {
	t.Helper()
	return testbin.Program(t, "apt-get install libxml2-utils", "xmllint")
}

type xmlSuites struct {
	Suites []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// TestJUnitValidates writes the JUnit XML of every fixture, checks it
// against the JUnit schema with xmllint, and reads it back: one testcase
// per case and variant, each a failure, an error, skipped or a pass as
// its trials say, failures carrying every failed grader's reason.
func TestJUnitValidates(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			rep := report.Build(f.in)
			doc, _ := readJUnit(t, rep, f.grades)
			if len(doc.Suites) != len(rep.Variants) {
				t.Fatalf("%d testsuites, want one per variant (%d)", len(doc.Suites), len(rep.Variants))
			}
			byKey := map[transcript.Key]grade.TrialGrade{}
			for _, g := range f.grades {
				byKey[g.Key] = g
			}
			for vi, s := range doc.Suites {
				v := rep.Variants[vi].Variant
				if len(s.Cases) != len(rep.Cases) || s.Tests != len(rep.Cases) {
					t.Fatalf("suite %q: %d testcases (tests=%d), want %d", s.Name, len(s.Cases), s.Tests, len(rep.Cases))
				}
				var failures, errors, skipped int
				for ci, c := range s.Cases {
					var fail, errd, pass bool
					var reasons []string
					for n := 1; n <= f.in.Run.Trials; n++ {
						g, ok := byKey[transcript.Key{Case: rep.Cases[ci].Case, Variant: v, Trial: n}]
						switch {
						case !ok:
						case g.Graded && g.Passed:
							pass = true
						case g.Graded:
							fail = true
							for _, r := range g.Results {
								if !r.Passed {
									reasons = append(reasons, r.Detail)
								}
							}
							if g.Failed != "" {
								reasons = append(reasons, g.Failed)
							}
						case g.Trial.Status == transcript.Errored:
							errd = true
						}
					}
					switch {
					case fail:
						failures++
						if c.Failure == nil || c.Error != nil || c.Skipped != nil {
							t.Fatalf("%s/%q: want a failure only, got %+v", v, c.Name, c)
						}
						for _, r := range reasons {
							if !strings.Contains(c.Failure.Body, xmlSafe(r)) {
								t.Errorf("%s/%q: failure body %q lacks the reason %q", v, c.Name, c.Failure.Body, r)
							}
						}
					case errd:
						errors++
						if c.Error == nil || c.Failure != nil || c.Skipped != nil {
							t.Fatalf("%s/%q: want an error only, got %+v", v, c.Name, c)
						}
					case !pass:
						skipped++
						if c.Skipped == nil || c.Failure != nil || c.Error != nil {
							t.Fatalf("%s/%q: want skipped, got %+v", v, c.Name, c)
						}
					default:
						if c.Skipped != nil || c.Failure != nil || c.Error != nil {
							t.Fatalf("%s/%q: want a pass, got %+v", v, c.Name, c)
						}
					}
				}
				if s.Failures != failures || s.Errors != errors || s.Skipped != skipped {
					t.Errorf("suite %q counts %d/%d/%d, want failures %d, errors %d, skipped %d", s.Name, s.Failures, s.Errors, s.Skipped, failures, errors, skipped)
				}
			}
		})
	}
}

// mdRow splits a Markdown table row into its cells, honouring \| escapes.
func mdRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line):
			cur.WriteByte(line[i])
			cur.WriteByte(line[i+1])
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// num reads a number out of s with re (one group), failing the test when
// it is not there.
func num(t *testing.T, re, s string) float64 {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in %q", re, s)
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], "−", "-"), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMarkdownNumbers reads the numbers back out of the Markdown of every
// fixture and checks them against the JSON report's: pass rates and
// intervals to their printed precision, counts exactly, one table row per
// variant, the differing cases, and the comparisons.
func TestMarkdownNumbers(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			rep := report.Build(f.in)
			// Go through JSON, as a reader of --json would.
			b, _ := json.Marshal(rep)
			var back report.Report
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := rep.WriteMarkdown(&buf, report.Verdict{Checked: true, Failed: []string{"variant " + hostile[0] + " | under"}}); err != nil {
				t.Fatal(err)
			}
			md := buf.String()
			for _, r := range md {
				if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 {
					t.Fatalf("Markdown holds control character %U:\n%s", r, md)
				}
			}
			lines := strings.Split(md, "\n")
			at := func(prefix string) int {
				for i, l := range lines {
					if strings.HasPrefix(l, prefix) {
						return i
					}
				}
				return -1
			}
			if !strings.Contains(lines[2], "**Verdict: failed**") {
				t.Errorf("verdict line %q", lines[2])
			}
			head := at("| Variant |")
			if len(back.Variants) == 0 {
				if head >= 0 {
					t.Errorf("a table with no variants:\n%s", md)
				}
				return
			}
			cols := len(mdRow(lines[head]))
			marked := false
			for i, v := range back.Variants {
				cells := mdRow(lines[head+2+i])
				if len(cells) != cols {
					t.Fatalf("row %q has %d cells, the header %d", lines[head+2+i], len(cells), cols)
				}
				if v.PassRate == nil {
					if cells[3] != "–" {
						t.Errorf("%s: rate %q, want –", v.Variant, cells[3])
					}
				} else {
					near(t, num(t, `^([0-9.]+)%$`, cells[3]), *v.PassRate*100, 0.05)
					// † marks an interval on the number of cases.
					iv, mark := strings.CutSuffix(cells[4], "†")
					if cases := v.IntervalRule == report.IntervalCases; mark != cases {
						t.Errorf("%s: interval %q under rule %s, want † only under %s", v.Variant, cells[4], v.IntervalRule, report.IntervalCases)
					}
					marked = marked || mark
					near(t, num(t, `^([0-9.]+)–`, iv), v.Interval.Low*100, 0.05)
					near(t, num(t, `–([0-9.]+)%$`, iv), v.Interval.High*100, 0.05)
				}
				if want := fmt.Sprintf("%d/%d", v.Passed, v.Graded); cells[5] != want {
					t.Errorf("%s: passed %q, want %q", v.Variant, cells[5], want)
				}
				if cells[6] != strconv.Itoa(v.Outcomes.Errored) || cells[7] != strconv.Itoa(v.Missing) {
					t.Errorf("%s: errored %q missing %q, want %d %d", v.Variant, cells[6], cells[7], v.Outcomes.Errored, v.Missing)
				}
			}
			if legend := at("† "); marked != (legend > head) {
				t.Errorf("a † in the table: %v; its legend at line %d:\n%s", marked, legend, md)
			}
			var differ []report.CaseRow
			for _, c := range back.Cases {
				if c.Differs {
					differ = append(differ, c)
				}
			}
			if ch := at("| Case |"); len(differ) > 0 && len(back.Variants) > 1 {
				if ch < 0 {
					t.Fatalf("no table of differing cases:\n%s", md)
				}
				for i, c := range differ[:min(len(differ), 20)] {
					cells := mdRow(lines[ch+2+i])
					for vi, cell := range c.Variants {
						if want := fmt.Sprintf("%d/%d", cell.Passed, cell.Graded); cells[1+vi] != want {
							t.Errorf("case %q under %s: %q, want %q", c.Case, cell.Variant, cells[1+vi], want)
						}
					}
				}
				if len(differ) > 20 && !strings.Contains(md, fmt.Sprintf("…and %d more", len(differ)-20)) {
					t.Errorf("no note of the %d cases left out", len(differ)-20)
				}
			} else if ch >= 0 {
				t.Errorf("a table of differing cases with none differing:\n%s", md)
			}
			cmpLines := 0
			for _, l := range lines {
				if strings.HasPrefix(l, "- ") && strings.Contains(l, "sign test") {
					c := back.Comparisons[cmpLines]
					for c.Cases == 0 {
						cmpLines++
						c = back.Comparisons[cmpLines]
					}
					near(t, num(t, `: ([+-][0-9.]+) \[`, l), *c.MeanDifference, 0.005)
					near(t, num(t, `CI ([+-][0-9.]+) …`, l), c.Interval.Low, 0.005)
					near(t, num(t, `… ([+-][0-9.]+)\]`, l), c.Interval.High, 0.005)
					if p := *c.SignTestP; p >= 0.0005 {
						near(t, num(t, `p=([0-9.]+)`, l), p, 0.0005)
					}
					cmpLines++
				}
			}
		})
	}
}

func near(t *testing.T, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol+1e-9 {
		t.Errorf("got %v, want %v (±%v)", got, want, tol)
	}
}

// TestSchemaValidates checks the JSON of every fixture's report, and of
// comparisons between them, against mst schema report's schema; and that
// the schema refuses a field it does not describe and a wrong kind.
func TestSchemaValidates(t *testing.T) {
	t.Parallel()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("report.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, v any, valid bool) {
		t.Helper()
		b, _ := json.Marshal(v)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); (err == nil) != valid {
			t.Errorf("%s: valid %v, want %v: %v", name, err == nil, valid, err)
		}
	}
	fs := fixtures()
	var tools report.ToolHashes
	tools.Add(&transcript.Transcript{Key: transcript.Key{Variant: "a"}, Servers: []transcript.ServerInfo{{Name: "s", ToolsHash: "h1", ServerToolsHash: "h2"}}})
	for i, f := range fs {
		rep := report.Build(f.in)
		check(f.name, rep, true)
		other := report.Build(fs[(i+1)%len(fs)].in)
		check(f.name+" compared", report.CompareRuns(other, rep, tools, report.ToolHashes{}), true)
		check(f.name+" compared with itself", report.CompareRuns(rep, rep, tools, tools), true)
	}
	// A field the schema does not describe, and a wrong kind.
	var m map[string]any
	b, _ := json.Marshal(report.Build(fs[1].in))
	json.Unmarshal(b, &m)
	m["surprise"] = 1
	check("an unknown top-level field", m, false)
	delete(m, "surprise")
	m["variants"].([]any)[0].(map[string]any)["newNumber"] = 2
	check("an unknown variant field", m, false)
	delete(m["variants"].([]any)[0].(map[string]any), "newNumber")
	m["kind"] = "mst.compare"
	check("a report with the kind of a comparison", m, false)
}

// textLinesFit fails the test when a line of out is wider than width,
// unless it is one word (an id, which is never cut) after its indent.
func textLinesFit(t *testing.T, out string, width int) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if utf8.RuneCountInString(l) <= width {
			continue
		}
		fields := strings.Fields(l)
		if len(fields) == 1 {
			continue
		}
		// A header line: a label and one id.
		if len(fields) <= 3 && (fields[0] == "Run" || fields[0] == "Base" || fields[0] == "Eval") {
			continue
		}
		t.Errorf("line of %d characters at width %d: %q", utf8.RuneCountInString(l), width, l)
	}
}

// TestTextFitsWidth writes every fixture's report, and a comparison, at
// 40, 80 and 120 columns: every line fits but those that hold a single id;
// with no limit the text is WriteText's.
func TestTextFitsWidth(t *testing.T) {
	t.Parallel()
	fs := fixtures()
	for i, f := range fs {
		rep := report.Build(f.in)
		var whole, unlimited bytes.Buffer
		rep.WriteText(&whole)
		rep.WriteTextWidth(&unlimited, 0)
		if whole.String() != unlimited.String() {
			t.Errorf("%s: WriteTextWidth(0) differs from WriteText", f.name)
		}
		base := report.Build(fs[(i+1)%len(fs)].in)
		cmp := report.CompareRuns(base, rep, report.ToolHashes{}, report.ToolHashes{})
		for _, width := range []int{40, 80, 120} {
			var out bytes.Buffer
			if err := rep.WriteTextWidth(&out, width); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteFailures(&out, f.grades, width); err != nil {
				t.Fatal(err)
			}
			if err := cmp.WriteTextWidth(&out, width); err != nil {
				t.Fatal(err)
			}
			textLinesFit(t, out.String(), width)
			// The pass rates survive any width.
			for _, v := range rep.Variants {
				if v.PassRate != nil && !strings.Contains(out.String(), fmt.Sprintf("%.1f%%", *v.PassRate*100)) {
					t.Errorf("%s at %d: no pass rate of %s", f.name, width, v.Variant)
				}
			}
		}
	}
}

// TestWrap breaks texts of every kind at every width: no line is wider
// than the width unless it is a single word, words keep their order, and
// no word is cut.
func TestWrap(t *testing.T) {
	t.Parallel()
	texts := []string{
		"", "one", strings.Repeat("word ", 50), "a-very-long-identifier-that-does-not-fit-anywhere and then words",
		"mixed — unicode… words ünïcödé and more words to wrap around the edge",
		"    indented first line " + strings.Repeat("and more ", 12),
	}
	for _, s := range texts {
		for width := 1; width <= 90; width++ {
			got := report.Wrap(s, width, "  ")
			if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(s), " ") {
				t.Fatalf("Wrap(%q, %d) changed the words: %q", s, width, got)
			}
			if lead := len(s) - len(strings.TrimLeft(s, " ")); !strings.HasPrefix(got, s[:lead]) {
				t.Fatalf("Wrap(%q, %d) lost the first line's indent: %q", s, width, got)
			}
			for _, l := range strings.Split(got, "\n") {
				if utf8.RuneCountInString(l) > width && len(strings.Fields(l)) > 1 {
					t.Fatalf("Wrap(%q, %d): line %q is too wide", s, width, l)
				}
			}
		}
	}
}

// xmlSafe is s as XML can hold it: every byte that is not UTF-8 and every
// control character but tab, newline and return as U+FFFD.
func xmlSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}
