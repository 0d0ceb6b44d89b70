package secrets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Redactor removes the values of a Set from text. It sees values added to
// the Set after it was made. A nil *Redactor removes nothing. Its methods
// may be called from any goroutine.
type Redactor struct {
	set *Set
}

// NewRedactor returns a Redactor for s; a nil s gives a Redactor that
// removes nothing.
func NewRedactor(s *Set) *Redactor {
	return &Redactor{set: s}
}

// pattern is one form of one value, as it may appear in stored text.
type pattern struct {
	text []byte
	name string
}

// buildPatterns lists every form of every value, longest first (ties by
// name, then text, so the result is stable). A form shared by two values
// keeps the name of the one added first.
func buildPatterns(known []entry) []pattern {
	owner := map[string]string{}
	var pats []pattern
	for _, e := range known {
		for _, f := range forms(e.value) {
			if _, ok := owner[f]; ok {
				continue
			}
			owner[f] = e.name
			pats = append(pats, pattern{text: []byte(f), name: e.name})
		}
	}
	slices.SortFunc(pats, func(a, b pattern) int {
		if len(a.text) != len(b.text) {
			return len(b.text) - len(a.text)
		}
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return bytes.Compare(a.text, b.text)
	})
	return pats
}

// forms returns v and the distinct forms it takes once escaped.
func forms(v string) []string {
	escapes := []func(string) string{
		func(s string) string { return goJSON(s, true) },
		func(s string) string { return goJSON(s, false) },
		func(s string) string { return minimalJSON(s, false) },
		func(s string) string { return minimalJSON(s, true) },
	}
	out := []string{v}
	for _, esc := range escapes {
		once := esc(v)
		out = append(out, once, esc(once))
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v))
	slices.Sort(out)
	return slices.Compact(out)
}

// goJSON is s inside a JSON string as encoding/json writes it.
func goJSON(s string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	enc.Encode(s) // a string always encodes
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}

// minimalJSON is s inside a JSON string escaped the way JavaScript's
// JSON.stringify does (quote, backslash and control characters only), or,
// with ascii, the way Python's json.dumps does by default (also every
// non-ASCII character as \uXXXX).
func minimalJSON(s string, ascii bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		case ascii && r > 0x7e && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case ascii && r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// span is a stretch of text to replace with the label of name.
type span struct {
	start, end int
	name       string
}

// find returns where the patterns occur in b, overlapping occurrences
// merged into one span, in order.
func find(b []byte, pats []pattern) []span {
	var spans []span
	for _, p := range pats {
		for i := 0; i+len(p.text) <= len(b); {
			j := bytes.Index(b[i:], p.text)
			if j < 0 {
				break
			}
			spans = append(spans, span{i + j, i + j + len(p.text), p.name})
			i += j + len(p.text)
		}
	}
	if len(spans) < 2 {
		return spans
	}
	// Longest first among spans that start together, so a merged span is
	// labelled with the longest value that starts it.
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s.start < last.end {
			last.end = max(last.end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// replace returns b with each span replaced by its label.
func replace(b []byte, spans []span) []byte {
	out := make([]byte, 0, len(b))
	at := 0
	for _, s := range spans {
		out = append(out, b[at:s.start]...)
		out = append(out, "[redacted:"...)
		out = append(out, s.name...)
		out = append(out, ']')
		at = s.end
	}
	return append(out, b[at:]...)
}

func (r *Redactor) patterns() []pattern {
	if r == nil || r.set == nil {
		return nil
	}
	return r.set.patterns()
}

// Bytes returns b with every occurrence of every secret value, in any of
// its forms, replaced by [redacted:NAME]. When nothing matches it returns b
// itself; otherwise a new slice, and b is not changed.
func (r *Redactor) Bytes(b []byte) []byte {
	spans := find(b, r.patterns())
	if len(spans) == 0 {
		return b
	}
	return replace(b, spans)
}

// String is Bytes for a string.
func (r *Redactor) String(s string) string {
	pats := r.patterns()
	if len(pats) == 0 {
		return s
	}
	b := []byte(s)
	spans := find(b, pats)
	if len(spans) == 0 {
		return s
	}
	return string(replace(b, spans))
}

// maxLen returns the length of the longest pattern, or 0.
func maxLen(pats []pattern) int {
	if len(pats) == 0 {
		return 0
	}
	return len(pats[0].text)
}
