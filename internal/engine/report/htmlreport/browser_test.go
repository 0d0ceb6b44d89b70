package htmlreport_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/report/htmlreport"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport/htmlreporttest"
	"github.com/mst-eval/mst/internal/testkit/chromiumtest"
)

// writePage writes the fixture's page to a file and returns its URL.
func writePage(t *testing.T, f fixture) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, f.html(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + path
}

// TestPageInChromium opens the page of a run whose every text is hostile
// in a real Chromium: it loads with nothing on the console (no script
// error, no request the page's policy blocked), shows the numbers of
// --json, opens a transcript when a cell of the grid is clicked, shows
// hostile text as text with its controls as visible escapes, and runs no
// script but its own.
func TestPageInChromium(t *testing.T) {
	t.Parallel()
	f := makeFixture(spec{cases: 12, variants: 3, trials: 2, name: hostileName(), missing: 9})
	p := chromiumtest.New(t)
	p.Open(t, writePage(t, f), `html[data-ready="1"]`)
	htmlreporttest.CheckNumbers(t, p, f.reportJSON(t))

	tr := f.src.transcripts[4] // a trial of case 0 under variant 2
	htmlreporttest.OpenCell(t, p, 0, 2)
	type shown struct {
		Title, Messages, Calls, Grades string
		Escapes                        int
		Pwned                          bool
	}
	got := chromiumtest.Eval[shown](t, p, `({
		title: document.getElementById("trial-title").textContent,
		messages: document.getElementById("trial-messages").textContent,
		calls: document.getElementById("trial-calls").textContent,
		grades: document.getElementById("trial-grades") ? document.getElementById("trial-grades").textContent : "",
		escapes: document.querySelectorAll("#viewer-body .esc").length,
		pwned: window.__pwned !== undefined,
	})`)
	if got.Pwned {
		t.Error("a script from the run ran in the page")
	}
	if want := visible(tr.Prompt); !contains(got.Messages, want) {
		t.Errorf("the opened transcript does not show its prompt %q:\n%s", want, got.Messages)
	}
	if want := visible(tr.ToolCalls[0].Result); !contains(got.Calls, want) {
		t.Errorf("the opened transcript does not show its tool result %q:\n%s", want, got.Calls)
	}
	if got.Escapes == 0 {
		t.Error("the transcript shows no control character as an escape")
	}
	if !contains(got.Grades, "answerContains rain") {
		t.Errorf("the transcript does not show its graders: %q", got.Grades)
	}
	p.Screenshot(t, "htmlreport-transcript.png")
	// A trial of an error group opens from its link.
	if n := chromiumtest.Eval[int](t, p, `document.querySelectorAll("#errors a.open").length`); n == 0 {
		t.Error("the errored trials list no trial")
	} else {
		chromiumtest.Eval[bool](t, p, `(document.querySelector("#errors details").open = true, true)`)
		p.Click(t, "#errors details a.open")
		p.WaitVisible(t, "#trial-verdict")
		if v := chromiumtest.Eval[string](t, p, `document.getElementById("trial-verdict").textContent`); !contains(v, "errored") && !contains(v, "cancelled") {
			t.Errorf("the error group's link opened a trial that says %q", v)
		}
	}
	p.NoErrors(t)
}

// visible is how the page shows s: controls and the marks that reorder
// text as \uXXXX (the page keeps newlines and tabs), other text as it is.
func visible(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || 0x7f <= r && r <= 0x9f || r == 0x61c || r == 0x200e || r == 0x200f || r == 0x2028 || r == 0x2029 || 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069 || r == 0xfeff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func contains(s, sub string) bool { return bytes.Contains([]byte(s), []byte(sub)) }

// TestLargePageInChromium builds the page of a run of 10,000 trials and
// opens it in Chromium; it logs the page's size, how long it took to build
// and to load (figures, not checks: see BenchmarkWrite10000Trials), and
// checks that it loads cleanly and that a transcript of its last case opens.
func TestLargePageInChromium(t *testing.T) {
	t.Parallel()
	f := makeFixture(spec{cases: 1000, variants: 2, trials: 5})
	start := time.Now()
	page := f.html(t)
	built := time.Since(start)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	p := chromiumtest.New(t)
	p.Open(t, "about:blank", "body")
	loaded := p.Open(t, "file://"+path, `html[data-ready="1"]`)
	t.Logf("10,000 trials: page %.1f MB, built in %s, loaded in Chromium in %s", float64(len(page))/1e6, built.Round(time.Millisecond), loaded.Round(time.Millisecond))
	htmlreporttest.OpenCell(t, p, 999, 1)
	if title := chromiumtest.Eval[string](t, p, `document.getElementById("trial-title").textContent`); !contains(title, "case-0999") {
		t.Errorf("the transcript opened is %q, want one of case-0999", title)
	}
	p.NoErrors(t)
}

// BenchmarkWrite10000Trials builds the page of a run of 10,000 trials
// and reports its size.
func BenchmarkWrite10000Trials(b *testing.B) {
	f := makeFixture(spec{cases: 1000, variants: 2, trials: 5})
	var size int
	for b.Loop() {
		cw := &countWriter{}
		if err := htmlreport.Write(context.Background(), cw, f.rep, f.rec, f.src); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	b.ReportMetric(float64(size)/1e6, "MB/page")
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
