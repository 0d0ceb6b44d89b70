package report_test

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

// judgeSpec is one judge of a judged fixture.
type judgeSpec struct{ grader, hash string }

// Judges of the judged fixtures: a long name with Unicode and markup
// characters, and two judges that share a grader name (the same rubric
// sent to two models), whose hashes also share their first 8 characters.
var (
	judgeLong   = judgeSpec{"judge correctness — ‹answer matches the reference› ünïcödé ✓ <&> | *bold* [link] with a long rubric name", "3f9a1c0de4b2"}
	judgeModelA = judgeSpec{"judge tools", "77aa01bc99dd"}
	judgeModelB = judgeSpec{"judge tools", "77aa01bcee00"}
)

// Variants of the judged fixtures.
const (
	varLong    = "clear — ünïcödé variant ✓ with a long name | pipe_star* and more words"
	varErrored = "judge-errored"
	varSingle  = "single graded trial"
)

// judgedRun is a run of cases × the variants above × k trials:
//
//   - varLong: answered trials that pass or fail by turn, scored by the
//     three judges, the last trial of the last case skipped (so pass@k for
//     the largest k counts one case fewer);
//   - varErrored: answered trials whose judge errored every time, so none
//     is graded and no mean exists;
//   - varSingle: the first trial of each case answered and judged, the
//     others errored (provider), so only pass@1 is defined.
func judgedRun(name string, cases []string, k int) run {
	variants := []string{varLong, varErrored, varSingle}
	r := newRun(name, variants, cases, k)
	for ci, c := range cases {
		for vi, v := range variants {
			for n := 1; n <= k; n++ {
				g := grade.TrialGrade{Key: transcript.Key{Case: c, Variant: v, Trial: n}, Trial: grade.Summary{Status: transcript.Answered, DurationMs: float64(200 + n)}}
				var judges []judgeSpec
				errored := false
				switch vi {
				case 0:
					if ci == len(cases)-1 && n == k && k > 1 {
						g.Trial.Status, g.Trial.Detail = transcript.Skipped, "variant stopped"
						break
					}
					judges = []judgeSpec{judgeLong, judgeModelA, judgeModelB}
				case 1:
					judges, errored = []judgeSpec{judgeLong}, true
				case 2:
					if n > 1 {
						g.Trial.Status, g.Trial.Cause, g.Trial.Detail = transcript.Errored, transcript.CauseProvider, "429 from the provider"
						break
					}
					judges = []judgeSpec{judgeLong}
				}
				if g.Trial.Status == transcript.Answered {
					g.Graded, g.Passed = true, (ci+n+vi)%3 != 0
					g.Results = []grade.Result{{Grader: "toolCalled echo", Passed: g.Passed, Detail: "no call to echo"}}
				}
				for ji, j := range judges {
					res := grade.Result{Grader: j.grader, Judge: &grade.Verdict{Hash: j.hash, Model: "offline", Scale: grade.Scale{Min: 1, Max: 5}}}
					if errored {
						res.Error = "the judge model answered in another shape"
						g.Graded, g.Passed, g.Errored = false, false, j.grader+": "+res.Error
					} else {
						res.Judge.Score = float64(1 + (ci*2+n+ji)%5)
						res.Passed = res.Judge.Score >= 3
						res.Judge.Verdict = map[bool]string{true: "pass", false: "fail"}[res.Passed]
					}
					g.Results = append(g.Results, res)
				}
				r.grades = append(r.grades, g)
				r.in.Trials = append(r.in.Trials, report.NewTrial(g))
			}
		}
	}
	return r
}

// scoreFixtures are the judged runs with 3 trials and with 1 trial per
// case, and the fixtures of formats_test.go (no judges; 1 to 3 trials).
func scoreFixtures() []run {
	cases := []string{"c-1", "ünïcödé-käse ✓", "c-3", "c-4 with a long case id that goes on"}
	return append([]run{judgedRun("judged3", cases, 3), judgedRun("judged1", cases, 1)}, fixtures()...)
}

// TestJudgedFixtures checks that the judged fixtures have what the tests
// below rely on, so that they cannot pass vacuously.
func TestJudgedFixtures(t *testing.T) {
	t.Parallel()
	rep := report.Build(scoreFixtures()[0].in)
	long, errd, single := rep.Variants[0], rep.Variants[1], rep.Variants[2]
	if len(long.Judges) != 3 || long.Judges[0].Interval == nil || long.PassK[2].Cases != long.PassK[0].Cases-1 || long.PassK[2].PassAt == nil {
		t.Errorf("variant %q: judges %+v, passK %+v", long.Variant, long.Judges, long.PassK)
	}
	if len(errd.Judges) != 1 || errd.Judges[0].Mean != nil || errd.Judges[0].Errored != 12 || errd.PassK[0].PassAt != nil {
		t.Errorf("variant %q: judges %+v, passK %+v", errd.Variant, errd.Judges, errd.PassK)
	}
	if len(single.Judges) != 1 || single.Judges[0].Interval == nil || single.PassK[0].PassAt == nil || single.PassK[1].PassAt != nil {
		t.Errorf("variant %q: judges %+v, passK %+v", single.Variant, single.Judges, single.PassK)
	}
}

// unMD undoes the file's md escaping of one table cell.
func unMD(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(b.String())
}

var spaces2 = regexp.MustCompile(`\s{2,}`)

// textTable returns the rows of the text report's table whose header
// matches head (cells split at runs of two or more spaces), up to
// the first line that is empty, starts with "(" or says "could not be
// graded"; nil when there is no such table.
func textTable(text, head string) [][]string {
	re := regexp.MustCompile(head)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !re.MatchString(l) {
			continue
		}
		var rows [][]string
		for _, row := range lines[i:] {
			row = strings.TrimRight(row, " ")
			if row == "" || strings.HasPrefix(row, "(") || strings.Contains(row, "could not be graded") {
				break
			}
			rows = append(rows, spaces2.Split(row, -1))
		}
		return rows
	}
	return nil
}

// mdTable returns the rows of the Markdown table that follows the line
// starting with title, header first, separator left out, cells
// unescaped; nil when there is none.
func mdTable(md, title string) [][]string {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, title) {
			continue
		}
		var rows [][]string
		for j := i + 2; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			if j == i+3 {
				continue // |---|…
			}
			var cells []string
			for _, c := range mdRow(lines[j]) {
				cells = append(cells, unMD(c))
			}
			rows = append(rows, cells)
		}
		return rows
	}
	return nil
}

var rateCell = regexp.MustCompile(`^([0-9.]+)%(?: \((\d+)\))?$`)

// checkRate checks one pass@k or pass^k cell against the report's value:
// "–" when undefined, else the rate to 0.1% and "(n)" when fewer cases
// than the variant's pass@1 have k graded trials.
func checkRate(t *testing.T, where, cell string, x *float64, cases, all int) {
	t.Helper()
	if x == nil {
		if cell != "–" {
			t.Errorf("%s: %q, want – (undefined)", where, cell)
		}
		return
	}
	m := rateCell.FindStringSubmatch(cell)
	if m == nil {
		t.Fatalf("%s: %q is not a rate", where, cell)
	}
	got, _ := strconv.ParseFloat(m[1], 64)
	if math.Abs(got-*x*100) > 0.05+1e-9 {
		t.Errorf("%s: %q, want %.3f%%", where, cell, *x*100)
	}
	switch {
	case cases < all && m[2] != strconv.Itoa(cases):
		t.Errorf("%s: %q, want (%d) after it: only %d of %d cases", where, cell, cases, cases, all)
	case cases >= all && m[2] != "":
		t.Errorf("%s: %q, want no case count", where, cell)
	}
}

// sortedJudges lists every variant's judges as the reports do: by judge
// name, stably, variants in report order.
func sortedJudges(rep report.Report) (js []report.JudgeStats, variants []string) {
	type row struct {
		j report.JudgeStats
		v string
	}
	var rows []row
	for _, v := range rep.Variants {
		for _, j := range v.Judges {
			rows = append(rows, row{j, v.Variant})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.j.Grader, b.j.Grader) })
	for _, r := range rows {
		js, variants = append(js, r.j), append(variants, r.v)
	}
	return js, variants
}

// TestMarkdownPassKAndJudges writes the Markdown and the text report of
// every fixture. With more than one trial per case the Markdown has a
// pass@k / pass^k table after the variant table, one row per variant with
// the cells of the text report's table, each matching the report's
// numbers; with judges it has a judge table with the text report's rows,
// each matching the judge's numbers (mean and interval to 0.01). Without
// them neither table is there.
func TestMarkdownPassKAndJudges(t *testing.T) {
	t.Parallel()
	for _, f := range scoreFixtures() {
		t.Run(f.name, func(t *testing.T) {
			rep := report.Build(f.in)
			var mdBuf, textBuf bytes.Buffer
			if err := rep.WriteMarkdown(&mdBuf, report.Verdict{}); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteText(&textBuf); err != nil {
				t.Fatal(err)
			}
			md, text := mdBuf.String(), textBuf.String()
			k := rep.Run.TrialsPerCase

			pk := mdTable(md, "**pass@k / pass^k**")
			tpk := textTable(text, `^VARIANT +PASS@1 `)
			if k < 2 || len(rep.Variants) == 0 {
				if pk != nil || strings.Contains(md, "pass@") {
					t.Errorf("a pass@k table with %d trial per case:\n%s", k, md)
				}
			} else {
				if pk == nil {
					t.Fatalf("no pass@k table with %d trials per case:\n%s", k, md)
				}
				if at, before := strings.Index(md, "**pass@k"), strings.Index(md, "| Variant | Client |"); at < before {
					t.Errorf("the pass@k table is not after the variant table:\n%s", md)
				}
				if len(pk) != len(rep.Variants)+1 || len(tpk) != len(pk) {
					t.Fatalf("pass@k table: %d Markdown rows, %d text rows, want %d:\n%s\n%s", len(pk), len(tpk), len(rep.Variants)+1, md, text)
				}
				for i, row := range pk {
					if len(row) != 2*k {
						t.Fatalf("pass@k row %q has %d cells, want %d (variant, pass@1 … pass@%d, pass^2 … pass^%d)", row, len(row), 2*k, k, k)
					}
					for c := range row {
						want := tpk[i][c]
						if i == 0 {
							row[c], want = strings.ToLower(row[c]), strings.ToLower(want)
						}
						if row[c] != want {
							t.Errorf("pass@k row %d cell %d: Markdown %q, text %q", i, c, row[c], want)
						}
					}
					if i == 0 {
						continue
					}
					v := rep.Variants[i-1]
					all := v.PassK[0].Cases
					for j := 1; j <= k; j++ {
						checkRate(t, fmt.Sprintf("%s pass@%d", v.Variant, j), row[j], v.PassK[j-1].PassAt, v.PassK[j-1].Cases, all)
					}
					for j := 2; j <= k; j++ {
						checkRate(t, fmt.Sprintf("%s pass^%d", v.Variant, j), row[k+j-1], v.PassK[j-1].PassHat, v.PassK[j-1].Cases, all)
					}
				}
			}

			js, jv := sortedJudges(rep)
			jt := mdTable(md, "**Judge scores**")
			tjt := textTable(text, `^JUDGE +VARIANT `)
			if len(js) == 0 {
				if jt != nil {
					t.Errorf("a judge table without judges:\n%s", md)
				}
			} else {
				if len(jt) != len(js)+1 || len(tjt) != len(jt) {
					t.Fatalf("judge table: %d Markdown rows, %d text rows, want %d:\n%s\n%s", len(jt), len(tjt), len(js)+1, md, text)
				}
				if strings.Index(md, "**Judge scores**") < strings.Index(md, "| Variant | Client |") {
					t.Errorf("the judge table is not after the variant table:\n%s", md)
				}
				for i, row := range jt[1:] {
					j, want := js[i], tjt[i+1]
					if want[2] == "-" {
						want[2] = "–" // the Markdown's dash for "none"
					}
					if !slices.Equal(row, want) {
						t.Errorf("judge row %d: Markdown %q, text %q", i, row, want)
					}
					label := j.Grader + " #" + j.Hash[:min(8, len(j.Hash))]
					if row[0] != label || row[1] != jv[i] {
						t.Errorf("judge row %d names %q under %q, want %q under %q", i, row[0], row[1], label, jv[i])
					}
					if j.Mean == nil {
						if row[2] != "–" {
							t.Errorf("judge %q under %q has no mean, the Markdown says %q", j.Grader, jv[i], row[2])
						}
					} else {
						near(t, num(t, `^([0-9.]+)`, row[2]), *j.Mean, 0.005)
						if j.Interval != nil {
							near(t, num(t, `\[([0-9.]+),`, row[2]), j.Interval.Low, 0.005)
							near(t, num(t, `, ([0-9.]+)\]$`, row[2]), j.Interval.High, 0.005)
						} else if strings.Contains(row[2], "[") {
							t.Errorf("judge %q under %q has no interval, the Markdown says %q", j.Grader, jv[i], row[2])
						}
					}
					if w := fmt.Sprintf("%d–%d", j.Scale.Min, j.Scale.Max); row[3] != w {
						t.Errorf("judge %q scale %q, want %q", j.Grader, row[3], w)
					}
					if w := fmt.Sprintf("%d/%d", j.Passed, j.Scored); row[4] != w || row[5] != strconv.Itoa(j.Errored) {
						t.Errorf("judge %q judged pass %q errored %q, want %q %d", j.Grader, row[4], row[5], w, j.Errored)
					}
				}
			}
			errs := 0
			for _, v := range rep.Variants {
				errs += v.GradeErrors
			}
			if got := strings.Contains(md, "could not be graded"); got != (errs > 0) {
				t.Errorf("%d trials not graded by a judge; the Markdown says so: %v\n%s", errs, got, md)
			} else if errs > 0 && !strings.Contains(md, fmt.Sprintf("%d trials could not be graded", errs)) {
				t.Errorf("the Markdown does not count the %d trials no judge graded:\n%s", errs, md)
			}
		})
	}
}

// readJUnit writes rep's JUnit XML, checks it against the JUnit schema
// with xmllint, and returns it read back and as written.
func readJUnit(t *testing.T, rep report.Report, grades []grade.TrialGrade) (xmlSuites, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteJUnit(&buf, grades); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	xsd := filepath.Join("testdata", "junit", "junit.xsd")
	if out, err := exec.Command(xmllint(t), "--noout", "--schema", xsd, file).CombinedOutput(); err != nil {
		t.Fatalf("xmllint: %v\n%s\n%s", err, out, buf.Bytes())
	}
	var doc xmlSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc, buf.Bytes()
}

// TestJUnitScoreProperties writes the JUnit XML of every fixture,
// validates it with xmllint, and checks each testsuite's properties: one
// mst.passAtK.K and mst.passHatK.K for each k from 1 to the trials per
// case whose value is defined, holding the report's number exactly, and
// for each judge its mean, interval, judged, passed and errored counts
// and hash, under the grader name (with its hash when two judges of the
// variant share it). No property is repeated and no value is NaN or
// infinite.
func TestJUnitScoreProperties(t *testing.T) {
	t.Parallel()
	for _, f := range scoreFixtures() {
		t.Run(f.name, func(t *testing.T) {
			rep := report.Build(f.in)
			doc, junit := readJUnit(t, rep, f.grades)
			if len(doc.Suites) != len(rep.Variants) {
				t.Fatalf("%d testsuites, want %d", len(doc.Suites), len(rep.Variants))
			}
			for vi, s := range doc.Suites {
				v := rep.Variants[vi]
				props := map[string]string{}
				for _, p := range s.Props {
					if _, dup := props[p.Name]; dup {
						t.Errorf("suite %q: property %q twice", s.Name, p.Name)
					}
					props[p.Name] = p.Value
					switch {
					case p.Name == "mst.passRate" || strings.HasSuffix(p.Name, ".hash") || !strings.HasPrefix(p.Name, "mst.pass") && !strings.HasPrefix(p.Name, "mst.judge."):
					default:
						if x, err := strconv.ParseFloat(p.Value, 64); err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
							t.Errorf("suite %q: property %q = %q, not a finite number", s.Name, p.Name, p.Value)
						}
					}
				}
				want := map[string]*float64{}
				for _, p := range v.PassK {
					want[fmt.Sprintf("mst.passAtK.%d", p.K)] = p.PassAt
					want[fmt.Sprintf("mst.passHatK.%d", p.K)] = p.PassHat
				}
				if len(v.PassK) != rep.Run.TrialsPerCase {
					t.Fatalf("variant %q has %d pass@k entries, want %d", v.Variant, len(v.PassK), rep.Run.TrialsPerCase)
				}
				for name := range props {
					if _, ok := want[name]; !ok && strings.HasPrefix(name, "mst.pass") && name != "mst.passRate" {
						t.Errorf("suite %q: property %q, for no k of the report", s.Name, name)
					}
				}
				exact := func(name string, x *float64) {
					t.Helper()
					got, ok := props[name]
					switch {
					case x == nil && ok:
						t.Errorf("suite %q: property %q = %q, want none (undefined)", s.Name, name, got)
					case x != nil && !ok:
						t.Errorf("suite %q: no property %q (want %v)", s.Name, name, *x)
					case x != nil:
						if g, err := strconv.ParseFloat(got, 64); err != nil || g != *x {
							t.Errorf("suite %q: property %q = %q, want %v", s.Name, name, got, *x)
						}
					}
				}
				for name, x := range want {
					exact(name, x)
				}
				// The judges: find each by its hash, then check its numbers.
				judgeProps := 0
				for name := range props {
					if strings.HasPrefix(name, "mst.judge.") {
						judgeProps++
					}
				}
				wantProps := 0
				for _, j := range v.Judges {
					var pre string
					for name, val := range props {
						if strings.HasPrefix(name, "mst.judge.") && strings.HasSuffix(name, ".hash") && val == j.Hash {
							pre = strings.TrimSuffix(name, "hash")
						}
					}
					if pre == "" {
						t.Errorf("suite %q: no property of judge %q #%s:\n%s", s.Name, j.Grader, j.Hash, junit)
						continue
					}
					shared := false
					for _, o := range v.Judges {
						shared = shared || o.Grader == j.Grader && o.Hash != j.Hash
					}
					name := strings.TrimSuffix(strings.TrimPrefix(pre, "mst.judge."), ".")
					if !shared && name != j.Grader || shared && !strings.HasPrefix(name, j.Grader+" #") {
						t.Errorf("suite %q: judge %q #%s is named %q", s.Name, j.Grader, j.Hash, name)
					}
					exact(pre+"mean", j.Mean)
					var lo, hi *float64
					if j.Interval != nil {
						lo, hi = &j.Interval.Low, &j.Interval.High
					}
					exact(pre+"ciLow", lo)
					exact(pre+"ciHigh", hi)
					for suffix, n := range map[string]int{"judged": j.Scored, "passed": j.Passed, "errored": j.Errored} {
						if props[pre+suffix] != strconv.Itoa(n) {
							t.Errorf("suite %q: property %q = %q, want %d", s.Name, pre+suffix, props[pre+suffix], n)
						}
					}
					wantProps += 4
					for _, x := range []*float64{j.Mean, lo, hi} {
						if x != nil {
							wantProps++
						}
					}
				}
				if judgeProps != wantProps {
					t.Errorf("suite %q: %d judge properties, want %d", s.Name, judgeProps, wantProps)
				}
			}
		})
	}
}
