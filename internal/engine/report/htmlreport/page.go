package htmlreport

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

var (
	//go:embed page.tmpl
	pageSource string
	//go:embed report.css
	styleSource string
	//go:embed report.js
	scriptSource string
)

// The page's Content-Security-Policy allows its own style and script (by
// hash) and data: images, and nothing else: no request leaves the page,
// and no script but MST's runs, whatever a transcript holds.
var (
	pageTemplate = template.Must(template.New("page").Funcs(funcs).Parse(pageSource))
	csp          = fmt.Sprintf("default-src 'none'; style-src '%s'; script-src '%s'; img-src data:; base-uri 'none'; form-action 'none'",
		hash(styleSource), hash(scriptSource))
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

var funcs = template.FuncMap{
	"text":  text,
	"short": short,
	"pct":   pct,
	"num":   num,
	"ms":    millis,
	"p":     pValue,
	"diff":  signed,
	"score": score,
	"fixed": fixed2,
	"ptr":   func(x float64) *float64 { return &x },
}

// page is what the template reads.
type page struct {
	Rep   report.Report
	Run   transcript.Run
	Style template.CSS
	// Script is MST's own script; Policy is the page's CSP.
	Script template.JS
	Policy string
	// ReportJSON is the Report as `mst report --json` prints it; MetaJSON
	// holds the case and variant names the script needs.
	ReportJSON template.JS
	MetaJSON   template.JS
	RunJSON    string
	// Chart is the wide pass-rate chart, NarrowChart the one for a narrow
	// window.
	Chart       chart
	NarrowChart chart
	Variants    []variantRow
	// Cols are the variants table's optional columns the page shows.
	Cols     columns
	Rows     []gridRow
	Errors   []errorSection
	HasPassK bool
	PassKs   []int
	// Judges are the rows of the judge table, in the text report's order;
	// GradeErrors counts the trials that could not be graded.
	Judges       []judgeRow
	GradeErrors  int
	caseIndex    map[string]int
	variantIndex map[string]int
}

func newPage(rep report.Report, rec transcript.Run) *page {
	p := &page{Rep: rep, Run: rec, Style: template.CSS(styleSource), Script: template.JS(scriptSource), Policy: csp,
		caseIndex: map[string]int{}, variantIndex: map[string]int{}}
	var cases, variants []string
	for i, c := range rep.Cases {
		if _, ok := p.caseIndex[c.Case]; !ok {
			p.caseIndex[c.Case] = i
		}
		cases = append(cases, c.Case)
	}
	for i, v := range rep.Variants {
		if _, ok := p.variantIndex[v.Variant]; !ok {
			p.variantIndex[v.Variant] = i
		}
		variants = append(variants, v.Variant)
	}
	p.ReportJSON = template.JS(mustJSON(rep))
	p.MetaJSON = template.JS(mustJSON(map[string]any{"cases": cases, "variants": variants, "trialsPerCase": rep.Run.TrialsPerCase}))
	if b, err := json.MarshalIndent(rec, "", "  "); err == nil {
		p.RunJSON = multiline(string(b))
	}
	p.Chart, p.NarrowChart = newChart(rep, false), newChart(rep, true)
	p.Cols = newColumns(rep.Variants)
	for i, v := range rep.Variants {
		p.Variants = append(p.Variants, variantRow{Index: i, V: v})
	}
	for i, c := range rep.Cases {
		row := gridRow{Index: i, C: c}
		for j, cell := range c.Variants {
			vi := j
			if k, ok := p.variantIndex[cell.Variant]; ok {
				vi = k
			}
			row.Cells = append(row.Cells, gridCell{Case: i, Variant: vi, C: cell})
		}
		p.Rows = append(p.Rows, row)
	}
	rows, gradeErrors := rep.JudgeRows()
	for _, r := range rows {
		p.Judges = append(p.Judges, newJudgeRow(r))
	}
	p.GradeErrors = gradeErrors
	if k := rep.Run.TrialsPerCase; k >= 2 {
		p.HasPassK = true
		for j := 1; j <= k; j++ {
			p.PassKs = append(p.PassKs, j)
		}
	}
	return p
}

// cellOf returns the element id suffix of a trial of the plan:
// "CASE-VARIANT-TRIAL" as indexes.
func (p *page) cellOf(k transcript.Key) (string, bool) {
	slot, ok := p.slotOf(k)
	if !ok {
		return "", false
	}
	return p.idOf(slot), true
}

// slots is the number of trials in the report's plan.
func (p *page) slots() int {
	return len(p.caseIndex) * len(p.variantIndex) * max(p.Rep.Run.TrialsPerCase, 1)
}

// slotOf numbers the trials of the plan from 0 (case, then variant, then
// trial): a place in a table rather than a map entry keyed by strings.
func (p *page) slotOf(k transcript.Key) (int, bool) {
	ci, ok := p.caseIndex[k.Case]
	if !ok {
		return 0, false
	}
	vi, ok := p.variantIndex[k.Variant]
	trials := max(p.Rep.Run.TrialsPerCase, 1)
	if !ok || k.Trial < 1 || k.Trial > trials {
		return 0, false
	}
	return (ci*len(p.variantIndex)+vi)*trials + k.Trial - 1, true
}

// idOf is the element id suffix of the trial at slot.
func (p *page) idOf(slot int) string {
	trials := max(p.Rep.Run.TrialsPerCase, 1)
	vi := slot / trials % len(p.variantIndex)
	ci := slot / trials / len(p.variantIndex)
	return fmt.Sprintf("%d-%d-%d", ci, vi, slot%trials+1)
}

// errorKey is one error group of a variant: a status and a cause.
type errorKey struct{ variant, status, cause string }

// addErrors lists, under each of the report's error groups, the trials of
// that group: errored holds, by group, every trial of the plan whose
// latest grade says it errored (was not graded), with its detail.
func (p *page) addErrors(errored map[errorKey][]errorTrial) {
	for vi, v := range p.Rep.Variants {
		for _, g := range v.ErrorGroups {
			sec := errorSection{Variant: vi, Name: v.Variant, G: g}
			sec.First, _ = p.cellOf(g.First)
			trials := errored[errorKey{v.Variant, g.Status, g.Cause}]
			slices.SortStableFunc(trials, func(a, b errorTrial) int { return p.compareKeys(a.Key, b.Key) })
			for _, t := range trials {
				if len(sec.Trials) == maxListed {
					sec.More = len(trials) - maxListed
					break
				}
				id, ok := p.cellOf(t.Key)
				if !ok {
					continue
				}
				t.ID = id
				sec.Trials = append(sec.Trials, t)
			}
			p.Errors = append(p.Errors, sec)
		}
	}
}

// maxListed is how many trials an error group lists by name.
const maxListed = 50

// compareKeys orders the trials of one variant as the grid lists them:
// by case, then trial.
func (p *page) compareKeys(a, b transcript.Key) int {
	if d := p.caseIndex[a.Case] - p.caseIndex[b.Case]; d != 0 {
		return d
	}
	return a.Trial - b.Trial
}

type variantRow struct {
	Index int
	V     report.VariantStats
}

// columns says which optional columns of the variants table the page
// shows: one that is zero or empty for every variant (no trial timed out
// anywhere, no model named) is left out, so that the table fits, and
// Hidden names those left out, for a note under the table. A column any
// variant has a value in is shown for all.
type columns struct {
	Client, Model                                            bool
	NoAnswer, TimedOut, Errored, Cancelled, Skipped, Missing bool
	Tokens, Latency, ToolCalls                               bool
	Hidden                                                   string
}

func newColumns(variants []report.VariantStats) columns {
	var c columns
	for _, v := range variants {
		c.Client = c.Client || v.Client != ""
		c.Model = c.Model || v.Model != ""
		c.NoAnswer = c.NoAnswer || v.Outcomes.NoAnswer != 0
		c.TimedOut = c.TimedOut || v.Outcomes.TimedOut != 0
		c.Errored = c.Errored || v.Outcomes.Errored != 0
		c.Cancelled = c.Cancelled || v.Outcomes.Cancelled != 0
		c.Skipped = c.Skipped || v.Outcomes.Skipped != 0
		c.Missing = c.Missing || v.Missing != 0
		c.Tokens = c.Tokens || v.Tokens.Input != 0 || v.Tokens.Output != 0
		c.Latency = c.Latency || v.LatencyMs.P50 != nil || v.LatencyMs.P95 != nil
		c.ToolCalls = c.ToolCalls || v.ToolCalls.Mean != nil
	}
	if len(variants) == 0 {
		return c
	}
	var zero, empty []string
	for _, col := range []struct {
		shown bool
		name  string
		count bool
	}{
		{c.Client, "client", false}, {c.Model, "model", false},
		{c.NoAnswer, "no answer", true}, {c.TimedOut, "timed out", true}, {c.Errored, "errored", true},
		{c.Cancelled, "cancelled", true}, {c.Skipped, "skipped", true}, {c.Missing, "missing", true},
		{c.Tokens, "tokens", true}, {c.Latency, "latency", false}, {c.ToolCalls, "tool calls / trial", false},
	} {
		switch {
		case col.shown:
		case col.count:
			zero = append(zero, col.name)
		default:
			empty = append(empty, col.name)
		}
	}
	var parts []string
	if len(zero) > 0 {
		parts = append(parts, list(zero)+": 0 in every variant")
	}
	if len(empty) > 0 {
		parts = append(parts, list(empty)+": none in any variant")
	}
	if len(parts) > 0 {
		c.Hidden = "Columns left out, as they say nothing here: " + strings.Join(parts, "; ") + "."
	}
	return c
}

// list joins names as a sentence does: "a", "a and b", "a, b and c".
func list(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// judgeRow is one row of the judge table. Name is the judge's grader
// name, cut to fit; Suffix is what its label adds to it (" #" and the
// start of its hash), never cut, so that judges of one name stay apart.
type judgeRow struct {
	report.JudgeRow
	Name, Suffix string
}

func newJudgeRow(r report.JudgeRow) judgeRow {
	return judgeRow{JudgeRow: r, Name: short(text(r.Stats.Grader), 120), Suffix: text(strings.TrimPrefix(r.Label, r.Stats.Grader))}
}

type gridRow struct {
	Index int
	C     report.CaseRow
	Cells []gridCell
}

type gridCell struct {
	Case, Variant int
	C             report.CaseCell
}

// Class colours a cell by its pass fraction.
func (c gridCell) Class() string {
	switch {
	case c.C.Trials == 0:
		return "miss"
	case c.C.Graded == 0:
		return "ng"
	}
	f := float64(c.C.Passed) / float64(c.C.Graded)
	switch {
	case f == 1:
		return "g4"
	case f >= 0.75:
		return "g3"
	case f >= 0.5:
		return "g2"
	case f > 0:
		return "g1"
	}
	return "g0"
}

// Extra says what a cell holds beyond passed/graded.
func (c gridCell) Extra() string {
	var parts []string
	if n := c.C.Trials - c.C.Graded; n > 0 {
		parts = append(parts, fmt.Sprintf("+%d not graded", n))
	}
	if n := c.C.Planned - c.C.Trials; n > 0 {
		parts = append(parts, fmt.Sprintf("+%d missing", n))
	}
	return strings.Join(parts, " ")
}

type errorSection struct {
	Variant int
	Name    string
	G       report.ErrorGroup
	First   string
	Trials  []errorTrial
	More    int
}

type errorTrial struct {
	ID     string
	Key    transcript.Key
	Detail string
}

// chart is the pass-rate chart: one bar per variant with its interval.
// The page has two: a wide one, each variant's name left of its bar and
// its value right of it, and a narrow one for a phone's screen, the name
// above the bar and the value below it; the page's style shows one.
type chart struct {
	Narrow                    bool
	Width, Height, Left, Plot int
	Bars                      []bar
	Ticks                     []tick
}

type bar struct {
	Y, Y2, Mid, W, Low, High float64
	// The name is drawn at (LabelX, LabelY), the value at (ValueX, ValueY).
	LabelX, LabelY, ValueX, ValueY float64
	Label, Value                   string
	Has, HasInterval               bool
}

type tick struct {
	X     float64
	Label string
}

// The chart's room for text, in the chart's pixels: gap is the space
// between a name or a value and the plot, margin what is left around
// the whole. Text is measured by textWidth, at the chart's font size
// (report.css).
const (
	gap    = 8
	margin = 8
)

func newChart(rep report.Report, narrow bool) chart {
	c := chart{Narrow: narrow, Plot: 420}
	row, barTop, labelLen := 28.0, 8.0, 28
	if narrow {
		c.Plot, row, barTop, labelLen = 340, 58, 20, 40
	}
	for i, v := range rep.Variants {
		b := bar{Y: float64(i)*row + barTop, Label: short(text(v.Variant), labelLen), Value: "no graded trial"}
		b.Mid, b.Y2 = b.Y+9, b.Y+18
		if narrow {
			b.LabelY, b.ValueY = b.Y-6, b.Y2+15
		} else {
			b.LabelX, b.LabelY = -gap, b.Y+14
			b.ValueX, b.ValueY = float64(c.Plot+gap), b.Y+14
		}
		if v.PassRate != nil {
			b.Has = true
			b.W = round1(*v.PassRate * float64(c.Plot))
			b.Value = fmt.Sprintf("%s (%d/%d)", pct(v.PassRate), v.Passed, v.Graded)
			if v.Interval != nil {
				b.HasInterval = true
				b.Low = round1(v.Interval.Low * float64(c.Plot))
				b.High = round1(v.Interval.High * float64(c.Plot))
				b.Value = fmt.Sprintf("%s [%.1f–%.1f] (%d/%d)", pct(v.PassRate), v.Interval.Low*100, v.Interval.High*100, v.Passed, v.Graded)
			}
		}
		c.Bars = append(c.Bars, b)
	}
	// The chart is as wide as its longest name and value need, so that
	// none is cut off at its edges; the tick labels are centred on the
	// plot's ends.
	label, value := 0.0, 0.0
	for _, b := range c.Bars {
		label = max(label, textWidth(b.Label))
		value = max(value, textWidth(b.Value))
	}
	tickHalf := textWidth("100%") / 2
	if narrow {
		c.Left = int(math.Ceil(tickHalf)) + margin
		c.Width = c.Left + int(math.Ceil(max(float64(c.Plot)+tickHalf, label, value))) + margin
	} else {
		c.Left = int(math.Ceil(max(label+gap, tickHalf))) + margin
		c.Width = c.Left + c.Plot + int(math.Ceil(max(value+gap, tickHalf))) + margin
	}
	c.Height = int(float64(len(rep.Variants))*row) + 34
	if narrow {
		c.Height += 6
	}
	for i := 0; i <= 4; i++ {
		c.Ticks = append(c.Ticks, tick{X: float64(c.Plot * i / 4), Label: fmt.Sprintf("%d%%", i*25)})
	}
	return c
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// textWidth is a generous estimate of how wide s is drawn in pixels at the
// chart's 12px sans-serif font: wide (East Asian, emoji) characters take a
// full em, any other at most two thirds of one.
func textWidth(s string) float64 {
	w := 0.0
	for _, r := range s {
		if r >= 0x1100 && (unicode.In(r, unicode.Han, unicode.Hangul, unicode.Hiragana, unicode.Katakana) || r >= 0x1f000 || 0xff00 <= r && r <= 0xffef) {
			w += 12
		} else {
			w += 8
		}
	}
	return w
}

// fixed2 shows a mean with two decimals, or "–" when there is none.
func fixed2(x *float64) string {
	if x == nil {
		return "–"
	}
	return strconv.FormatFloat(*x, 'f', 2, 64)
}

func mustJSON(v any) string {
	var buf bytes.Buffer
	if err := encodeBody(&buf, v); err != nil {
		panic(err) // a Report and plain names always marshal
	}
	return buf.String()
}

// text makes a name from a run safe to show on one line: controls, the
// marks that reorder text and bytes that are not UTF-8 become visible
// escapes (transcript.Printable); html/template escapes the rest.
func text(s string) string {
	return strings.ReplaceAll(transcript.Printable(s), "\ufeff", `\ufeff`)
}

// multiline is text for a <pre>: Printable line by line, keeping the
// newlines.
func multiline(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = text(l)
	}
	return strings.Join(lines, "\n")
}

// short cuts s to n characters, with an ellipsis.
func short(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// pct shows a rate as "66.7%", or "–" when there is none.
func pct(x *float64) string {
	if x == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", *x*100)
}

// num is a number exactly as --json writes it, for data-value attributes:
// the page's tests read them back.
func num(x any) string {
	switch v := x.(type) {
	case *float64:
		if v == nil {
			return "null"
		}
		x = *v
	case *report.Interval:
		if v == nil {
			return "null"
		}
	}
	b, err := json.Marshal(x)
	if err != nil {
		return ""
	}
	return string(b)
}

func millis(ms *float64) string {
	if ms == nil {
		return "–"
	}
	v := *ms
	switch {
	case v < 999.5:
		return fmt.Sprintf("%.0f ms", v)
	case v < 59_950:
		return fmt.Sprintf("%.1f s", v/1000)
	default:
		s := int(math.Round(v / 1000))
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
}

// score shows a judge's score as the other reports do, or "–" when there
// is none.
func score(x *float64) string {
	if x == nil {
		return "–"
	}
	return report.FormatScore(*x)
}

func signed(x *float64) string {
	if x == nil {
		return "–"
	}
	s := fmt.Sprintf("%+.2f", *x)
	if s == "-0.00" {
		s = "+0.00"
	}
	return s
}

func pValue(p *float64) string {
	if p == nil {
		return "–"
	}
	if *p < 0.0005 {
		return "p<0.001"
	}
	return "p=" + strconv.FormatFloat(*p, 'f', 3, 64)
}
