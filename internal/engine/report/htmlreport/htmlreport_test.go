package htmlreport_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport"
	"github.com/mst-eval/mst/transcript"
)

// payloads are texts a run may hold that a page would act on if it took
// them as markup or script (tags, a script end, attribute breaks, comment
// and CDATA openers, template syntax), or that would change how text reads
// (controls, a NUL, the marks that reorder text, line separators, bytes
// that are not UTF-8).
var payloads = []string{
	`<script>window.__pwned=1</script>`,
	`</script><script>window.__pwned=2</script>`,
	`<img src=x onerror="window.__pwned=3">`,
	`"'><svg onload=window.__pwned=4>`,
	`<!-- <![CDATA[ ]]> {{.Policy}} javascript:void(0)`,
	"esc\x1b[2J\x1b]0;title\x07",
	"rtl\u202eevil\u2066iso",
	"nul\x00c1\u009bdel\x7f",
	"ls\u2028ps\u2029bom\ufeff",
	"bad\xff\xfe",
}

// hostileName appends a payload to every text of the fixture, in turn.
func hostileName() func(string) string {
	i := 0
	return func(s string) string {
		i++
		return s + payloads[i%len(payloads)]
	}
}

// TestWriteEscapesHostileText writes the page of a run whose every text
// (names, prompts, messages, tool arguments and results, errors, grader
// reasons, telemetry, run.json) holds each payload: the page's only tags
// are its own, and the file holds no control character but newlines and
// no mark that reorders text.
func TestWriteEscapesHostileText(t *testing.T) {
	t.Parallel()
	f := makeFixture(spec{cases: 12, variants: 3, trials: 2, name: hostileName(), missing: 9})
	page := f.html(t)
	if !utf8.Valid(page) {
		t.Error("the page is not UTF-8")
	}
	for i, line := range bytes.Split(page, []byte("\n")) {
		if j := bytes.IndexFunc(line, func(r rune) bool {
			return r != '\t' && unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' || r == '\ufeff'
		}); j >= 0 {
			r, _ := utf8.DecodeRune(line[j:])
			t.Errorf("line %d holds %U: %.200q", i+1, r, line)
		}
	}
	low := strings.ToLower(string(page))
	scripts := 3 + f.src.documents() // the report, the names, each trial and grade, the page's script
	if n := strings.Count(low, "<script"); n != scripts {
		t.Errorf("the page has %d <script tags, want %d", n, scripts)
	}
	if n := strings.Count(low, "</script"); n != scripts {
		t.Errorf("the page has %d </script tags, want %d", n, scripts)
	}
	for _, bad := range []string{"<img", "<svg onload", "<script>window", "<!--", "<![cdata"} {
		if strings.Contains(low, bad) {
			i := strings.Index(low, bad)
			t.Errorf("the page holds %q: %q", bad, low[max(0, i-80):min(len(low), i+80)])
		}
	}
	if n := strings.Count(low, "<svg"); n != 2 {
		t.Errorf("the page has %d <svg tags, want its chart's two (wide and narrow)", n)
	}
	// The names are there, escaped.
	for _, want := range []string{`&lt;script&gt;window.__pwned=1&lt;/script&gt;`, `rtl\u202eevil`, `esc\x1b[2J`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page does not show %s", want)
		}
	}
}

// TestWriteCutsLongStrings: a transcript's long texts (a tool result, its
// arguments, a message, an error, the telemetry) are cut to MaxString
// bytes each, at a character boundary, saying so; the page stays small.
func TestWriteCutsLongStrings(t *testing.T) {
	t.Parallel()
	f := makeFixture(spec{cases: 1, variants: 1, trials: 1})
	long := strings.Repeat("é", 3*htmlreport.MaxString) // two bytes each: cuts fall inside characters
	tr := f.src.transcripts[0]
	tr.ToolCalls[0].Result = long
	tr.ToolCalls[0].Arguments = []byte(`{"q":"` + long + `"}`)
	tr.Messages[0].Text = "x" + long
	tr.Outcome.Detail = long
	tr.ClientTelemetry = map[string]any{"raw": long}
	f.src.grades[0].Results[0].Detail = long
	page := string(f.html(t))
	if !utf8.ValidString(page) {
		t.Error("the page is not UTF-8: a cut split a character")
	}
	if n := strings.Count(page, "the report cut"); n < 6 {
		t.Errorf("the page says %d times that it cut a text, want at least 6", n)
	}
	if max := 12*htmlreport.MaxString + 200_000; len(page) > max {
		t.Errorf("the page is %d bytes, want at most %d", len(page), max)
	}
}

// TestWriteKeepsThePlan: transcripts outside the report's plan (another
// variant, a case it does not have, a trial index past trials per case)
// and a second transcript of one trial are left out.
func TestWriteKeepsThePlan(t *testing.T) {
	t.Parallel()
	f := makeFixture(spec{cases: 2, variants: 2, trials: 1})
	first := *f.src.transcripts[0]
	for _, k := range []transcript.Key{
		{Case: "case-0000", Variant: "other", Trial: 1},
		{Case: "nope", Variant: "variant-0", Trial: 1},
		{Case: "case-0000", Variant: "variant-0", Trial: 2},
		first.Key,
	} {
		tr := first
		tr.Key = k
		tr.Prompt = "outside the plan"
		f.src.transcripts = append(f.src.transcripts, &tr)
	}
	page := string(f.html(t))
	if n := strings.Count(page, `<script type="application/json" id="t-`); n != 4 {
		t.Errorf("the page holds %d transcripts, want the plan's 4", n)
	}
	if strings.Contains(page, "outside the plan") {
		t.Error("the page holds a transcript outside the plan")
	}
}

// historySource is a run whose grade log keeps every grade it was given,
// older ones included, as a store's does (store.GradeHistory).
type historySource struct {
	*memSource
	history []grade.TrialGrade
}

func (h historySource) GradeHistory(ctx context.Context, fn func(grade.TrialGrade) error) error {
	for _, g := range h.history {
		if err := fn(g); err != nil {
			return err
		}
	}
	return nil
}

// TestWriteFromHistory: a page written from a grade log with a history
// (every trial graded twice or more, a grade of a trial outside the plan,
// errored trials regraded as passed and the other way round) is the page
// written from the latest grades alone: the latest grade of a trial wins
// wherever it is in the log.
func TestWriteFromHistory(t *testing.T) {
	t.Parallel()
	f := makeFixture(spec{cases: 12, variants: 3, trials: 2, name: hostileName(), missing: 9})
	want := f.html(t)
	h := historySource{memSource: f.src}
	for i, g := range f.src.grades {
		old := g
		old.Graded, old.Passed, old.Failed = !g.Graded, !g.Passed, "an older grade"
		if i%2 == 0 {
			old.Trial.Status, old.Trial.Cause, old.Trial.Detail = transcript.Errored, transcript.CauseClient, "an older error"
		}
		h.history = append(h.history, old)
	}
	outside := f.src.grades[0]
	outside.Key.Trial = 99
	h.history = append(h.history, outside)
	h.history = append(h.history, f.src.grades...)
	var buf bytes.Buffer
	if err := htmlreport.Write(t.Context(), &buf, f.rep, f.rec, h); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("the page written from a grade history differs from the page written from the latest grades (%d bytes, want %d)", buf.Len(), len(want))
	}
}
