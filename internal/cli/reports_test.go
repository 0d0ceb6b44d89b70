package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/testkit/testbin"
)

// reportRuns are two real runs of one eval on the offline model against
// the MCP test server: base passes every case; changed runs the server
// with more tools, gives one variant another tool description, and
// expects answers the model never gives, so every case fails.
type reportRuns struct {
	dir, base, changed string
}

const reportsEval = `name: gates
datasets: [%s]
servers:
  test:
    command: %s
    args: [%s]
variants:
  plain:
    model: offline
  described:
    model: offline
    tools:
      test:
        echo: {description: %q}
trials: 1
graders:
  - toolCalled: echo
`

// mst runs mst in-process with env added to the environment, and returns
// its exit code, stdout and stderr.
func mst(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), args, cli.Stdio{Out: &stdout, Err: &stderr, Env: append(os.Environ(), env...)})
	return code, stdout.String(), stderr.String()
}

// makeReportRuns makes the two runs in a temporary folder.
func makeReportRuns(t *testing.T) reportRuns {
	t.Helper()
	t.Parallel()
	dir := t.TempDir()
	r := reportRuns{dir: dir}
	bin := filepath.Join(dir, "mcp-testserver")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mst-eval/mst/internal/testkit/testserver/cmd/mcp-testserver").CombinedOutput(); err != nil {
		t.Fatalf("building the test server: %v\n%s", err, out)
	}
	var good, bad strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&good, `{"id": "c%d", "input": "Please echo 'word%d' back to me", "expect": [{"answerContains": "word%d"}]}`+"\n", i, i, i)
		fmt.Fprintf(&bad, `{"id": "c%d", "input": "Please echo 'word%d' back to me", "expect": [{"answerContains": "never-said-%d"}]}`+"\n", i, i, i)
	}
	files := map[string]string{
		"good.jsonl":   good.String(),
		"bad.jsonl":    bad.String(),
		"base.yaml":    fmt.Sprintf(reportsEval, "good.jsonl", bin, "", "Repeat text."),
		"changed.yaml": fmt.Sprintf(reportsEval, "bad.jsonl", bin, "--many", "Repeat the text, word for word."),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"base", "changed"} {
		code, _, stderr := mst(t, nil, "run", filepath.Join(dir, name+".yaml"), "--results", filepath.Join(dir, name))
		if code != 0 {
			t.Fatalf("mst run %s exited %d\n%s", name, code, stderr)
		}
		m := regexp.MustCompile(`results: (\S+)`).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("mst run %s printed no results folder:\n%s", name, stderr)
		}
		if name == "base" {
			r.base = m[1]
		} else {
			r.changed = m[1]
		}
	}
	return r
}

// TestReportGates checks every gate's exit code on real runs, for mst
// report, mst compare and mst run, and that a gate that passes exits 0.
func TestReportGates(t *testing.T) {
	r := makeReportRuns(t)
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"report", r.base, "--min-pass-rate", "1"}, 0, ""},
		{[]string{"report", r.base, "--min-pass-rate", "plain=100%", "--baseline", r.base}, 0, ""},
		{[]string{"report", r.changed, "--min-pass-rate", "0.5"}, 5, "variant plain passes 0% (0/6), under --min-pass-rate 50%"},
		{[]string{"report", r.changed, "--min-pass-rate", "described=0.1"}, 5, "variant described passes 0%"},
		{[]string{"report", r.changed, "--min-pass-rate", "plain=0"}, 0, ""},
		{[]string{"report", r.changed, "--baseline", r.base}, 5, "passes less often than in base run"},
		{[]string{"report", r.base, "--baseline", r.changed}, 0, ""},
		{[]string{"report", r.changed, "--min-pass-rate", "nosuch=0.5"}, 2, `the run has no variant "nosuch"`},
		{[]string{"report", r.changed, "--min-pass-rate", "1.5"}, 2, "not a rate from 0 to 1"},
		{[]string{"report", r.changed, "--max-errored", "0"}, 0, ""},
		{[]string{"compare", r.base, r.changed}, 0, ""},
		{[]string{"compare", r.base, r.changed, "--fail-worse"}, 5, "variant described passes less often"},
		{[]string{"compare", r.changed, r.base, "--fail-worse"}, 0, ""},
		{[]string{"compare", r.base, r.changed, "--min-pass-rate", "0.9"}, 5, "under --min-pass-rate 90%"},
		{[]string{"run", filepath.Join(r.dir, "changed.yaml"), "--results", filepath.Join(r.dir, "gated"), "--baseline", r.base}, 5, "passes less often than in base run"},
		{[]string{"run", filepath.Join(r.dir, "changed.yaml"), "--results", filepath.Join(r.dir, "gated"), "--min-pass-rate", "0.2"}, 5, "under --min-pass-rate 20%"},
		{[]string{"run", filepath.Join(r.dir, "base.yaml"), "--results", filepath.Join(r.dir, "gated"), "--min-pass-rate", "0.2", "--baseline", r.base}, 0, ""},
	} {
		code, _, stderr := mst(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.err) {
			t.Errorf("mst %s: exit %d, stderr:\n%s\nwant exit %d with %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.err)
		}
	}
	// The exit code is in the table of every gated command's help.
	for _, c := range []string{"run", "report", "compare"} {
		_, out, _ := mst(t, nil, c, "--help")
		if !regexp.MustCompile(`(?m)^  5 +a gate failed`).MatchString(out) {
			t.Errorf("mst %s --help has no exit code 5:\n%s", c, out)
		}
	}
}

// TestReportMarkdownMatchesJSON reads the numbers back out of mst report
// --markdown and checks them against mst report --json, for both runs.
func TestReportMarkdownMatchesJSON(t *testing.T) {
	r := makeReportRuns(t)
	for _, run := range []string{r.base, r.changed} {
		_, js, _ := mst(t, nil, "report", run, "--json")
		var rep struct {
			Variants []struct {
				Variant      string
				PassRate     *float64
				Interval     *struct{ Low, High float64 }
				IntervalRule string
				Passed       int
				Graded       int
				Missing      int
				Outcomes     struct{ Errored int }
			}
		}
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatal(err)
		}
		_, md, _ := mst(t, nil, "report", run, "--markdown")
		// † follows an interval on the number of cases (intervalRule cases).
		row := regexp.MustCompile(`(?m)^\| (\S+) \| api \| offline \| ([0-9.]+)% \| ([0-9.]+)–([0-9.]+)%(†?) \| (\d+)/(\d+) \| (\d+) \| (\d+) \|$`)
		rows := row.FindAllStringSubmatch(md, -1)
		if len(rows) != len(rep.Variants) {
			t.Fatalf("%d variant rows in the Markdown, %d variants in the JSON:\n%s", len(rows), len(rep.Variants), md)
		}
		for i, v := range rep.Variants {
			m := rows[i]
			f := func(s string) float64 { x, _ := strconv.ParseFloat(s, 64); return x }
			if m[1] != v.Variant || abs(f(m[2])-*v.PassRate*100) > 0.05 || abs(f(m[3])-v.Interval.Low*100) > 0.05 || abs(f(m[4])-v.Interval.High*100) > 0.05 ||
				(m[5] == "†") != (v.IntervalRule == "cases") ||
				m[6] != strconv.Itoa(v.Passed) || m[7] != strconv.Itoa(v.Graded) || m[8] != strconv.Itoa(v.Outcomes.Errored) || m[9] != strconv.Itoa(v.Missing) {
				t.Errorf("Markdown row %q disagrees with the JSON %+v", m[0], v)
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestReportJUnit writes mst report --junit for both runs and validates
// the files against the JUnit schema with xmllint: the base run's cases
// pass, the changed run's fail with their graders' reasons.
func TestReportJUnit(t *testing.T) {
	r := makeReportRuns(t)
	lint := testbin.Program(t, "apt-get install libxml2-utils", "xmllint")
	xsd := filepath.Join("..", "engine", "report", "testdata", "junit", "junit.xsd")
	for _, tc := range []struct {
		run      string
		failures string
	}{{r.base, `failures="0"`}, {r.changed, `failures="6"`}} {
		file := filepath.Join(t.TempDir(), "junit.xml")
		if code, _, stderr := mst(t, nil, "report", tc.run, "--junit", file); code != 0 {
			t.Fatalf("mst report --junit exited %d: %s", code, stderr)
		}
		if out, err := exec.Command(lint, "--noout", "--schema", xsd, file).CombinedOutput(); err != nil {
			t.Fatalf("xmllint: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(file)
		if strings.Count(string(b), "<testcase ") != 12 || strings.Count(string(b), tc.failures) != 2 {
			t.Errorf("want 12 testcases and %s in both suites:\n%s", tc.failures, b)
		}
		if tc.run == r.changed && !strings.Contains(string(b), `answer does not contain &#34;never-said-3&#34;`) {
			t.Errorf("the failures lack their graders' reasons:\n%s", b)
		}
	}
}

// TestCompareReportsToolChanges compares the two runs in every format:
// the server's own tool list changed (--many), the tools offered changed
// under both variants, every case got worse.
func TestCompareReportsToolChanges(t *testing.T) {
	r := makeReportRuns(t)
	_, text, _ := mst(t, nil, "compare", r.base, r.changed)
	for _, want := range []string{
		"server test: the server's own tool list changed",
		"server test, variant described: the tools offered changed",
		"server test, variant plain: the tools offered changed",
		"[-1.00 … -1.00]", "p=0.031 worse", "  described  c1  1.00 → 0.00",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("mst compare lacks %q:\n%s", want, text)
		}
	}
	_, md, _ := mst(t, nil, "compare", r.base, r.changed, "--markdown", "--fail-worse")
	for _, want := range []string{"**Verdict: failed**", "| described | 100.0% | 0.0% | -1.00 |", "- server test: the server's own tool list changed"} {
		if !strings.Contains(md, want) {
			t.Errorf("mst compare --markdown lacks %q:\n%s", want, md)
		}
	}
	_, js, _ := mst(t, nil, "compare", r.base, r.changed, "--json")
	var c struct {
		Kind     string
		Version  int
		Variants []struct {
			Variant string
			Worse   bool
		}
		Servers []struct {
			Server             string
			ServerToolsChanged bool
			Offered            []struct{ Changed bool }
		}
	}
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	if c.Kind != "mst.compare" || c.Version != 1 || len(c.Variants) != 2 || !c.Variants[0].Worse || len(c.Servers) != 1 || !c.Servers[0].ServerToolsChanged || len(c.Servers[0].Offered) != 2 || !c.Servers[0].Offered[0].Changed {
		t.Errorf("mst compare --json: %+v\n%s", c, js)
	}
	// The same run against itself: nothing changed.
	_, same, _ := mst(t, nil, "compare", r.base, r.base)
	if !strings.Contains(same, "server test: the server's own tool list is the same") || strings.Contains(same, "changed") {
		t.Errorf("a run compared with itself:\n%s", same)
	}
}

// TestSchemaDescribesJSON validates every JSON output of the report
// commands against mst schema report, and checks that every --json output
// of mst starts its object with kind and version.
func TestSchemaDescribesJSON(t *testing.T) {
	r := makeReportRuns(t)
	_, schemaText, _ := mst(t, nil, "schema", "report")
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schemaText))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.AddResource("report.json", doc)
	sch, err := comp.Compile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	// A second grade set of the changed run, for mst compare RUN
	// --base-grades 1.
	graders := filepath.Join(r.dir, "graders.yaml")
	os.WriteFile(graders, []byte("- toolCalled: echo\n"), 0o644)
	if code, _, stderr := mst(t, nil, "grade", r.changed, "--graders", graders); code != 0 {
		t.Fatalf("mst grade --graders exited %d\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"report", r.base, "--json"}, {"report", r.changed, "--json"},
		{"compare", r.base, r.changed, "--json"}, {"compare", r.changed, r.changed, "--json"},
		{"compare", r.changed, "--base-grades", "1", "--json"},
	} {
		_, out, _ := mst(t, nil, args...)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
		if err != nil {
			t.Fatalf("mst %v: %v", args, err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("mst %v does not validate against mst schema report: %v", args, err)
		}
	}
	kinds := map[string][]string{
		"mst.report":         {"report", r.base, "--json"},
		"mst.compare":        {"compare", r.base, r.changed, "--json"},
		"mst.compare-grades": {"compare", r.changed, "--base-grades", "1", "--json"},
		"mst.clients":        {"clients", "--json"},
		"mst.client":         {"clients", "show", "api", "--json"},
		"mst.runners":        {"runner", "list", "--json"},
		"mst.validation":     {"validate", filepath.Join(r.dir, "base.yaml"), "--json"},
	}
	for kind, args := range kinds {
		_, out, _ := mst(t, nil, args...)
		var env struct {
			Kind    string
			Version int
		}
		if err := json.Unmarshal([]byte(out), &env); err != nil || env.Kind != kind || env.Version < 1 {
			t.Errorf("mst %v: kind %q version %d (%v), want %s", args, env.Kind, env.Version, err, kind)
		}
		if !regexp.MustCompile(`^\{\s*"kind": "` + regexp.QuoteMeta(kind) + `",\s*"version": \d+`).MatchString(out) {
			t.Errorf("mst %v does not start with its kind and version: %.80s", args, out)
		}
	}
}

// TestReportFailuresAndShow lists the failed trials with their reasons
// and prints one transcript in full, with its grade.
func TestReportFailuresAndShow(t *testing.T) {
	r := makeReportRuns(t)
	_, out, _ := mst(t, nil, "report", r.changed, "--failures")
	for i := 1; i <= 6; i++ {
		for _, v := range []string{"plain", "described"} {
			if !strings.Contains(out, fmt.Sprintf("  %s/c%d#1\n    answerContains \"never-said-%d\": answer does not contain \"never-said-%d\"", v, i, i, i)) {
				t.Errorf("--failures lacks %s/c%d with its reason:\n%s", v, i, out)
			}
		}
	}
	if _, out, _ := mst(t, nil, "report", r.base, "--failures"); !strings.Contains(out, "No graded trial failed.") {
		t.Errorf("--failures of a run that passed:\n%s", out)
	}
	code, out, stderr := mst(t, nil, "show", r.changed, "described", "c2")
	for _, want := range []string{
		"Trial    described/c2#1", "Prompt:\n  Please echo 'word2' back to me",
		`→ call test.echo {"text":"word2"}`, "Answer:\n  echo: word2",
		"Grade:   failed\n  ✓ toolCalled echo\n  ✗ answerContains \"never-said-2\": answer does not contain \"never-said-2\"",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("mst show (exit %d, %s) lacks %q:\n%s", code, stderr, want, out)
		}
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"show", r.changed, "described", "c2", "2"}, "no transcript of described/c2#2: its trials of that case are 1"},
		{[]string{"show", r.changed, "nosuch", "c2"}, "no trial of variant nosuch was stored"},
		{[]string{"show", r.changed, "plain", "c2", "zero"}, `TRIAL "zero": write the trial's number`},
	} {
		if code, _, stderr := mst(t, nil, tc.args...); code != 2 || !strings.Contains(stderr, tc.err) {
			t.Errorf("mst %v: exit %d, %s; want 2 with %q", tc.args, code, stderr, tc.err)
		}
	}
}

// TestOutputFitsWidth prints the report, the comparison, the failures and
// the client list at 40, 80 and 120 columns (COLUMNS): no line is wider,
// but a header line that holds one id; the pass rates are still there.
func TestOutputFitsWidth(t *testing.T) {
	r := makeReportRuns(t)
	// The quickstart's run has a judge, whose table must fit too.
	qs := quickstartCopy(t)
	qsResults := filepath.Join(filepath.Dir(qs), "results")
	if code, _, stderr := mst(t, nil, "run", qs, "--results", qsResults); code != 0 {
		t.Fatalf("mst run quickstart exited %d: %s", code, stderr)
	}
	qsRun, _ := filepath.Glob(filepath.Join(qsResults, "*", "runs", "*"))
	if len(qsRun) != 1 {
		t.Fatalf("quickstart runs: %v", qsRun)
	}
	for _, width := range []int{40, 80, 120} {
		env := []string{"COLUMNS=" + strconv.Itoa(width)}
		for _, args := range [][]string{
			{"report", r.base}, {"report", r.changed, "--failures", "--baseline", r.base},
			{"compare", r.base, r.changed}, {"clients"}, {"report", qsRun[0]},
		} {
			_, out, _ := mst(t, env, args...)
			for _, l := range strings.Split(out, "\n") {
				if n := utf8.RuneCountInString(l); n > width && !oneID(l) {
					t.Errorf("mst %s at %d columns: a line of %d: %q", args[0], width, n, l)
				}
			}
			if args[0] == "report" && args[1] != qsRun[0] && !strings.Contains(out, "100.0% [51.7–100.0]†") && !strings.Contains(out, "0.0% [0.0–48.3]†") {
				t.Errorf("mst report at %d columns lost the pass rates:\n%s", width, out)
			}
		}
	}
	// Without COLUMNS, and not on a terminal, lines are whole.
	_, out, _ := mst(t, nil, "report", r.base)
	if !strings.Contains(out, "TOKENS IN/OUT") {
		t.Errorf("mst report to a pipe left columns out:\n%s", out)
	}
}

// oneID says a line is a header label and a single word, or one word.
func oneID(l string) bool {
	f := strings.Fields(l)
	return len(f) == 1 || len(f) <= 3 && (f[0] == "Run" || f[0] == "Base" || f[0] == "Eval")
}
