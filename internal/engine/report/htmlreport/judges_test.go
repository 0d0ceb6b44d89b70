package htmlreport_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport/htmlreporttest"
	"github.com/mst-eval/mst/internal/testkit/chromiumtest"
)

// Judges of the judged fixture: names with markup, quotes and ampersands
// that the page must show as text, Unicode, a name long enough to be cut
// (its hash must stay), two judges of one name told apart by their hash,
// and a judge that errors on every trial of the variant it grades.
var fixtureJudges = []judgeSpec{
	{grader: `judge correctness <script>window.__pwned=5</script> & "quoted" — ‹ünïcödé› ✓`, hash: "3f9a1c0de4b2aa", scale: grade.Scale{Min: 1, Max: 5}},
	{grader: "judge tools", hash: "77aa01bc99dd", scale: grade.Scale{Min: 0, Max: 10}},
	{grader: "judge tools", hash: "88bb02cdee00", scale: grade.Scale{Min: 1, Max: 5}, variants: []int{0, 2}},
	{grader: `judge that always errors <img src=x onerror="window.__pwned=6">`, hash: "deadbeef0123", scale: grade.Scale{Min: 1, Max: 5}, variants: []int{1}, errors: true},
	{grader: "judge " + strings.TrimSpace(strings.Repeat("with a rubric name ünïcödé & <b>long</b> ", 8)), hash: "0badc0ffee99", scale: grade.Scale{Min: 1, Max: 7}, variants: []int{2}},
}

// judgedVariants names the fixture's variants: markup and Unicode, a
// control character, and a name longer than the tables show.
func judgedVariants(s string) string {
	switch s {
	case "variant-0":
		return `variant <script>window.__pwned=7</script> & "q" ünïcödé ✓`
	case "variant-1":
		return "judge-errored"
	case "variant-2":
		return "clear — ünïcödé variant ✓ esc\x1b[2J with a long name that goes on past the cut <b>&amp;</b>"
	}
	return s
}

func judgedFixture() fixture {
	return makeFixture(spec{cases: 6, variants: 3, trials: 2, name: judgedVariants, judges: fixtureJudges})
}

// textJudgeRows returns the rows of the text report's judge table, header
// left out, cells split at runs of two or more spaces, and the line that
// counts the trials no judge could grade.
func textJudgeRows(t *testing.T, rep report.Report) (rows [][]string, errLine string) {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	cells := regexp.MustCompile(`\s{2,}`)
	for i, l := range lines {
		if !strings.HasPrefix(l, "JUDGE ") {
			continue
		}
		for _, row := range lines[i+1:] {
			if row = strings.TrimRight(row, " "); row == "" || strings.Contains(row, "could not be graded") {
				if strings.Contains(row, "could not be graded") {
					errLine = row
				}
				break
			}
			rows = append(rows, cells.Split(row, -1))
		}
	}
	return rows, errLine
}

// TestJudgesInChromium opens the page of a run graded by several judges
// in Chromium: after the variants table it has a judge table with the
// rows of the text report in its order (label, variant, mean with its
// interval or – when the judge never scored, scale, judged pass, errored),
// each holding the report's numbers; the count of the trials no judge
// could grade; names as text, with nothing injected. The page of a run
// without judges has no such section.
func TestJudgesInChromium(t *testing.T) {
	t.Parallel()
	f := judgedFixture()
	rows, gradeErrors := f.rep.JudgeRows()
	want, errLine := textJudgeRows(t, f.rep)
	if len(rows) != len(want) || len(rows) < 8 || gradeErrors == 0 || errLine == "" {
		t.Fatalf("the fixture has %d judge rows (text report: %d) and %d trials no judge graded (%q): want several of each", len(rows), len(want), gradeErrors, errLine)
	}
	p := chromiumtest.New(t)
	p.Open(t, writePage(t, f), `html[data-ready="1"]`)
	htmlreporttest.CheckNumbers(t, p, f.reportJSON(t))

	type shownRow struct {
		Variant, Judge         string
		Cells, Titles          []string
		Mean, Low, High, Scale string
	}
	type shown struct {
		Rows                []shownRow
		ErrLine, ErrCount   string
		Tags                []string
		After, NavLink      bool
		Pwned               bool
		ScriptsInSection    int
		HeadersAreRowHeader bool
	}
	got := chromiumtest.Eval[shown](t, p, `(() => {
		const sec = document.getElementById("judges");
		if (!sec) return {rows: [], tags: []};
		const attr = (tr, f) => { const e = tr.querySelector('[data-field="' + f + '"]'); return e ? e.getAttribute("data-value") : "absent"; };
		const rows = [...sec.querySelectorAll("#judge-table tbody tr")].map(tr => ({
			variant: tr.getAttribute("data-variant"), judge: tr.getAttribute("data-judge"),
			cells: [...tr.children].map(c => c.textContent), titles: [...tr.children].slice(0, 2).map(c => c.getAttribute("title")),
			mean: attr(tr, "mean"), low: attr(tr, "low"), high: attr(tr, "high"),
		}));
		const e = document.getElementById("grade-errors");
		return {
			rows,
			errLine: e ? e.textContent : "", errCount: e ? e.querySelector('[data-field="gradeErrors"]').textContent : "",
			tags: [...new Set([...sec.querySelectorAll("*")].map(x => x.tagName))],
			after: !!(document.getElementById("variants").compareDocumentPosition(sec) & Node.DOCUMENT_POSITION_FOLLOWING),
			navLink: !!document.querySelector('nav a[href="#judges"]'),
			pwned: window.__pwned !== undefined,
			headersAreRowHeader: [...sec.querySelectorAll("#judge-table tbody tr")].every(tr => tr.firstElementChild.tagName === "TH" && tr.firstElementChild.getAttribute("scope") === "row"),
		};
	})()`)
	if got.Pwned {
		t.Error("a script from a judge or variant name ran in the page")
	}
	allowed := map[string]bool{"H2": true, "P": true, "DIV": true, "TABLE": true, "THEAD": true, "TBODY": true, "TR": true, "TH": true, "TD": true, "SPAN": true, "CODE": true}
	for _, tag := range got.Tags {
		if !allowed[tag] {
			t.Errorf("the judge section holds a <%s> element: a name was taken as markup", strings.ToLower(tag))
		}
	}
	if !got.After || !got.NavLink || !got.HeadersAreRowHeader {
		t.Errorf("the judge section: after the variants table %v, linked from the page's nav %v, judges as row headers %v; want all", got.After, got.NavLink, got.HeadersAreRowHeader)
	}
	if len(got.Rows) != len(rows) {
		t.Fatalf("the page's judge table has %d rows, the report %d", len(got.Rows), len(rows))
	}
	cut := 0
	for i, r := range rows {
		g, w := got.Rows[i], want[i]
		where := fmt.Sprintf("judge row %d (%s under %s)", i, r.Label, r.Variant)
		if g.Variant != fmt.Sprint(r.VariantIndex) || g.Judge != fmt.Sprint(r.JudgeIndex) {
			t.Errorf("%s: the page has variant %s judge %s in its place, want %d and %d (the text report's order)", where, g.Variant, g.Judge, r.VariantIndex, r.JudgeIndex)
		}
		if len(g.Cells) != 6 || len(w) != 6 {
			t.Fatalf("%s: the page has cells %q, the text report %q; want 6 each", where, g.Cells, w)
		}
		// Names: whole in the title; in the cell whole, or cut with … and,
		// for a judge, keeping " #" and its short hash.
		suffix := strings.TrimPrefix(r.Label, r.Stats.Grader)
		for c, keep := range []string{suffix, ""} {
			if g.Titles[c] != w[c] {
				t.Errorf("%s: the page's title of cell %d is %q, the text report shows %q", where, c, g.Titles[c], w[c])
			}
			if g.Cells[c] == w[c] {
				continue
			}
			at := strings.Index(g.Cells[c], "…")
			if at < 0 || !strings.HasPrefix(w[c], g.Cells[c][:at]) || g.Cells[c][at+len("…"):] != keep {
				t.Errorf("%s: the page shows %q in cell %d, want the text report's %q, or its start, … and %q", where, g.Cells[c], c, w[c], keep)
			}
			cut++
		}
		if w[2] == "-" {
			w[2] = "–"
		}
		if fmt.Sprint(g.Cells[2:]) != fmt.Sprint(w[2:]) {
			t.Errorf("%s: the page shows %q, the text report %q", where, g.Cells[2:], w[2:])
		}
		// The exact numbers, and that they are the report's.
		j := r.Stats
		wm, wl, wh := "null", "absent", "absent"
		if j.Mean != nil {
			wm = fmt.Sprint(*j.Mean)
		}
		if j.Interval != nil {
			wl, wh = fmt.Sprint(j.Interval.Low), fmt.Sprint(j.Interval.High)
		}
		if g.Mean != wm || g.Low != wl || g.High != wh {
			t.Errorf("%s: the page holds mean %s [%s, %s], the report %s [%s, %s]", where, g.Mean, g.Low, g.High, wm, wl, wh)
		}
		if j.Mean == nil && g.Cells[2] != "–" {
			t.Errorf("%s: a judge that never scored shows %q, want –", where, g.Cells[2])
		}
		if g.Cells[4] != fmt.Sprintf("%d/%d", j.Passed, j.Scored) || g.Cells[5] != fmt.Sprint(j.Errored) {
			t.Errorf("%s: judged pass %q errored %q, the report has %d/%d and %d", where, g.Cells[4], g.Cells[5], j.Passed, j.Scored, j.Errored)
		}
	}
	if cut == 0 {
		t.Error("no name of the fixture was cut: the long names test nothing")
	}
	noMean := 0
	for _, r := range rows {
		if r.Stats.Mean == nil {
			noMean++
		}
	}
	if noMean == 0 {
		t.Error("every judge of the fixture has a mean: the errored judge tests nothing")
	}
	if got.ErrCount != fmt.Sprint(gradeErrors) || !strings.HasPrefix(errLine, fmt.Sprintf("%d trials could not be graded", gradeErrors)) || !strings.Contains(got.ErrLine, "could not be graded") {
		t.Errorf("trials no judge graded: the page says %q (%q), the text report %q; the report counts %d", got.ErrLine, got.ErrCount, errLine, gradeErrors)
	}
	chromiumtest.Eval[bool](t, p, `(document.getElementById("judges").scrollIntoView(), true)`)
	p.Screenshot(t, "htmlreport-judges.png")
	p.NoErrors(t)

	// A run without judges: no section, no link to it.
	plain := makeFixture(spec{cases: 4, variants: 2, trials: 2})
	if r, n := plain.rep.JudgeRows(); len(r) != 0 || n != 0 {
		t.Fatalf("the plain fixture has judges: %+v", r)
	}
	p.Open(t, writePage(t, plain), `html[data-ready="1"]`)
	htmlreporttest.CheckNumbers(t, p, plain.reportJSON(t))
	if chromiumtest.Eval[bool](t, p, `!!(document.getElementById("judges") || document.getElementById("judge-table") || document.querySelector('a[href="#judges"]'))`) {
		t.Error("the page of a run without judges has a judge section")
	}
	p.NoErrors(t)
}

// TestWriteJudgesEscaped: the page of the judged fixture holds the judge
// and variant names only escaped (its <script> tags are its own, no
// element comes from a name), and a page without judges holds no judge
// section.
func TestWriteJudgesEscaped(t *testing.T) {
	t.Parallel()
	f := judgedFixture()
	page := string(f.html(t))
	low := strings.ToLower(page)
	if n, want := strings.Count(low, "<script"), 3+f.src.documents(); n != want {
		t.Errorf("the page has %d <script tags, want %d", n, want)
	}
	for _, bad := range []string{"<script>window", "<img", "<b>"} {
		if i := strings.Index(low, bad); i >= 0 {
			t.Errorf("the page holds %q: %q", bad, low[max(0, i-80):min(len(low), i+80)])
		}
	}
	for _, want := range []string{`id="judges"`, `id="judge-table"`, `judge correctness &lt;script&gt;window.__pwned=5&lt;/script&gt; &amp; &#34;quoted&#34;`, `esc\x1b[2J`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not hold %s", want)
		}
	}
	if page := string(makeFixture(spec{cases: 2, variants: 2, trials: 1}).html(t)); strings.Contains(page, `id="judges"`) || strings.Contains(page, "Judge scores") {
		t.Error("the page of a run without judges has a judge section")
	}
}
