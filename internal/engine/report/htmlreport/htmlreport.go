// Package htmlreport writes the report of one run as a single HTML file
// that needs nothing else: its style, its script, its chart (inline SVG)
// and every transcript are inside it, and its Content-Security-Policy lets
// it load nothing from anywhere, so it opens the same from a CI artifact as
// from a laptop.
//
// Its numbers are those of a report.Report, the value that `mst report
// --json` prints: the page shows them as they are and embeds the Report
// itself as JSON. The page is rendered on the Go side for everything a
// report holds (the chart, the variants, pass@k, the judges' scores, the
// comparisons, the errored trials by cause, the case × variant grid,
// run.json); the transcripts are one small JSON document each, in a
// <script type="application/json"> element, parsed and rendered by the
// page's script only when one is opened, so that a run of ten thousand
// trials loads as fast as a small one.
//
// Everything that comes from a run (names, messages, tool arguments and
// results, error texts) is text to the page: the Go side escapes it with
// html/template and shows control characters and the marks that reorder
// text as visible escapes; the script builds nodes with textContent only.
// A string longer than MaxString bytes is cut, saying by how much.
package htmlreport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
	"unicode/utf8"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

// MaxString is the longest text, in bytes, the page keeps of one string
// of a transcript (a message, a tool result, an argument list); the rest is
// cut, and the page says how much was cut. The transcript file keeps it
// all.
const MaxString = 100_000

// Source gives the grades and the transcripts of a run, each streamed once.
// A store.Run is a Source.
type Source interface {
	// Grades calls fn for the latest grade of every graded trial.
	Grades(ctx context.Context, fn func(grade.TrialGrade) error) error
	// Transcripts calls fn for every stored transcript.
	Transcripts(ctx context.Context, fn func(*transcript.Transcript) error) error
}

// Write writes the HTML report of rep to w. rec is the run's run.json as
// stored (shown in full on the page); src gives the trials' grades and
// transcripts, which are read as they come and not kept: the grades twice
// (once for the errored trials the page lists, once to write each graded
// trial's grade beside its transcript), the transcripts once. What Write
// keeps per planned trial is a few bytes (when its transcript ended), so
// its memory does not grow with the size of the grades or transcripts.
// Only the trials of the report's plan (its cases and variants, trial 1 …
// trials per case) are put in; the first transcript of a trial wins.
func Write(ctx context.Context, w io.Writer, rep report.Report, rec transcript.Run, src Source) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	p := newPage(rep, rec)
	errored := map[errorKey][]errorTrial{}
	var grades func(fn func(slot int, g *grade.TrialGrade) error) error
	if src != nil {
		var err error
		if grades, err = p.latestGrades(ctx, src); err != nil {
			return fmt.Errorf("reading the run's grades: %w", err)
		}
		if err := grades(func(_ int, g *grade.TrialGrade) error {
			if !g.Graded && g.Trial.Status != "" {
				ek := errorKey{g.Key.Variant, g.Trial.Status, g.Trial.Cause}
				errored[ek] = append(errored[ek], errorTrial{Key: g.Key, Detail: clip(g.Trial.Detail)})
			}
			return nil
		}); err != nil {
			return fmt.Errorf("reading the run's grades: %w", err)
		}
	}
	p.addErrors(errored)
	if err := pageTemplate.ExecuteTemplate(bw, "head", p); err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	if src != nil {
		// ended holds, for each planned trial, when its transcript ended
		// (Unix nanoseconds), so that its grade can say whether it is of
		// that transcript; noTranscript marks the trials without one.
		const noTranscript = math.MinInt64
		ended := make([]int64, p.slots())
		for i := range ended {
			ended[i] = noTranscript
		}
		var buf bytes.Buffer
		err := src.Transcripts(ctx, func(t *transcript.Transcript) error {
			slot, ok := p.slotOf(t.Key)
			if !ok || ended[slot] != noTranscript {
				return nil
			}
			ended[slot] = endedAt(t.Timing.Ended)
			return writeScript(bw, &buf, "t-"+p.idOf(slot), newBody(t))
		})
		if err != nil {
			return fmt.Errorf("reading the run's transcripts: %w", err)
		}
		err = grades(func(slot int, g *grade.TrialGrade) error {
			if ended[slot] == noTranscript {
				return nil
			}
			return writeScript(bw, &buf, "g-"+p.idOf(slot), newGradeBody(g, ended[slot]))
		})
		if err != nil {
			return fmt.Errorf("reading the run's grades: %w", err)
		}
	}
	if err := pageTemplate.ExecuteTemplate(bw, "tail", p); err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	return bw.Flush()
}

// gradeHistory is what a grade log can give beyond Source: every grade in
// the order it was appended (store.GradeHistory).
type gradeHistory interface {
	GradeHistory(ctx context.Context, fn func(grade.TrialGrade) error) error
}

// latestGrades returns a function that calls fn with the latest grade of
// every trial of the page's plan that has one, as often as it is called.
// From a source with a grade history it keeps 4 bytes a planned trial:
// the place of the trial's latest grade in the history, found by a first
// read. Otherwise it reads src.Grades each time, which keeps what the
// source keeps to find the latest grades (a store: a map entry a trial).
func (p *page) latestGrades(ctx context.Context, src Source) (func(fn func(slot int, g *grade.TrialGrade) error) error, error) {
	h, ok := src.(gradeHistory)
	if !ok {
		return func(fn func(int, *grade.TrialGrade) error) error {
			return src.Grades(ctx, func(g grade.TrialGrade) error {
				if slot, ok := p.slotOf(g.Key); ok {
					return fn(slot, &g)
				}
				return nil
			})
		}, nil
	}
	latest := make([]uint32, p.slots()) // 1 + the place of the trial's latest grade; 0: none
	n := uint32(0)
	err := h.GradeHistory(ctx, func(g grade.TrialGrade) error {
		n++
		if slot, ok := p.slotOf(g.Key); ok {
			latest[slot] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func(fn func(int, *grade.TrialGrade) error) error {
		n := uint32(0)
		return h.GradeHistory(ctx, func(g grade.TrialGrade) error {
			n++
			if slot, ok := p.slotOf(g.Key); ok && latest[slot] == n {
				return fn(slot, &g)
			}
			return nil
		})
	}, nil
}

// endedAt is a transcript's end as Unix nanoseconds; 0 when it has none.
func endedAt(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// writeScript writes v as a JSON document in a <script> element of the
// given id, using buf.
func writeScript(bw *bufio.Writer, buf *bytes.Buffer, id string, v any) error {
	buf.Reset()
	if err := encodeBody(buf, v); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	fmt.Fprintf(bw, "<script type=\"application/json\" id=\"%s\">", id)
	bw.Write(buf.Bytes())
	_, err := bw.WriteString("</script>\n")
	return err
}

// encodeBody marshals v as JSON that is safe inside a <script> element and
// plain to read as source: encoding/json already writes <, >, & and the
// line and paragraph separators as \u escapes, and this also escapes the
// marks that reorder text and DEL and the C1 controls (JSON escapes C0).
func encodeBody(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	if !needsEscape(b) {
		buf.Truncate(len(b))
		return nil
	}
	out := make([]byte, 0, len(b)+64)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if reorderOrControl(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	buf.Reset()
	buf.Write(out)
	return nil
}

// needsEscape says whether b holds a character reorderOrControl names;
// they are all past ASCII's printable range, so most bytes are passed by
// one comparison.
func needsEscape(b []byte) bool {
	for i := 0; i < len(b); {
		if b[i] < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if reorderOrControl(r) {
			return true
		}
		i += n
	}
	return false
}

// reorderOrControl is true for the characters encodeBody escapes beyond
// what encoding/json does: DEL, C1 controls and the bidi marks.
func reorderOrControl(r rune) bool {
	switch {
	case r == 0x7f, 0x80 <= r && r <= 0x9f:
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', r == '\ufeff',
		'\u202a' <= r && r <= '\u202e', '\u2066' <= r && r <= '\u2069':
		return true
	}
	return false
}

// clip cuts s to MaxString bytes at a character boundary, saying how much
// it cut.
func clip(s string) string {
	if len(s) <= MaxString {
		return s
	}
	n := MaxString
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("\n… [the report cut %d more bytes; the transcript file has them all]", len(s)-n)
}

// clipRaw keeps a JSON value when it is short, and otherwise turns it into
// a JSON string of its cut text; text that is not JSON becomes a string.
func clipRaw(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	if len(m) <= MaxString && json.Valid(m) {
		return m
	}
	b, _ := json.Marshal(clip(string(m)))
	return b
}
