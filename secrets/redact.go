package secrets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
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
	// period is the smallest shift at which text overlaps itself, or
	// len(text) when it overlaps only in full.
	period int
}

// period returns the smallest p > 0 with t[i] == t[i+p] for every i.
func period(t []byte) int {
	// fail[i] is the length of the longest proper prefix of t[:i+1] that
	// is also its suffix (Knuth–Morris–Pratt).
	fail := make([]int, len(t))
	for i, k := 1, 0; i < len(t); i++ {
		for k > 0 && t[i] != t[k] {
			k = fail[k-1]
		}
		if t[i] == t[k] {
			k++
		}
		fail[i] = k
	}
	if len(t) == 0 {
		return 1
	}
	return len(t) - fail[len(t)-1]
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
			pats = append(pats, pattern{text: []byte(f), name: e.name, period: period([]byte(f))})
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

// forms returns v and the distinct forms it takes once escaped. A value
// that is not UTF-8 also takes the forms of the text decoders make of it:
// each bad byte replaced by U+FFFD (Go's range, encoding/json), each run
// of them (strings.ToValidUTF8), or each longest unfinished character
// (the WHATWG decoder of browsers and Node).
func forms(v string) []string {
	escapes := []func(string) string{
		func(s string) string { return goJSON(s, true) },
		func(s string) string { return goJSON(s, false) },
		func(s string) string { return minimalJSON(s, false) },
		func(s string) string { return minimalJSON(s, true) },
	}
	texts := []string{v}
	if !utf8.ValidString(v) {
		texts = append(texts, strings.ToValidUTF8(v, "\ufffd"), replaceBad(v))
	}
	var out []string
	for _, t := range texts {
		out = append(out, t)
		for _, esc := range escapes {
			once := esc(t)
			out = append(out, once, esc(once))
		}
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v))
	// A form that is mostly U+FFFD holds little of the value: with fewer
	// than MinLength other bytes it would match ordinary text, so it is
	// not looked for (the value as it is always is).
	out = slices.DeleteFunc(out, func(f string) bool { return f != v && !informative(f) })
	slices.Sort(out)
	return slices.Compact(out)
}

// informative says whether a form holds at least MinLength bytes besides
// the replacement characters U+FFFD a decoder put for bad bytes, raw or
// escaped once or twice.
func informative(f string) bool {
	for _, r := range []string{"\ufffd", `\\ufffd`, `\ufffd`} {
		f = strings.ReplaceAll(f, r, "")
	}
	return len(f) >= MinLength
}

// replaceBad replaces the bytes of s that are not UTF-8 as the WHATWG
// decoder does: each longest start of a character that cannot be finished
// (a lead byte and the continuation bytes that can follow it) becomes one
// U+FFFD, and any other bad byte one U+FFFD.
func replaceBad(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || n > 1 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		// The bytes a lead byte needs after it, and the range of the first.
		need, lo, hi := 0, byte(0x80), byte(0xbf)
		switch c := s[i]; {
		case 0xc2 <= c && c <= 0xdf:
			need = 1
		case c == 0xe0:
			need, lo = 2, 0xa0
		case c == 0xed:
			need, hi = 2, 0x9f
		case 0xe1 <= c && c <= 0xef:
			need = 2
		case c == 0xf0:
			need, lo = 3, 0x90
		case c == 0xf4:
			need, hi = 3, 0x8f
		case 0xf1 <= c && c <= 0xf3:
			need = 3
		}
		j := i + 1
		for k := 0; k < need && j < len(s) && lo <= s[j] && s[j] <= hi; k++ {
			j++
			lo, hi = 0x80, 0xbf
		}
		b.WriteString("\ufffd")
		i = j
	}
	return b.String()
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
		// Occurrences may overlap ("abab" twice in "ababab"), but only by
		// a shift that is a period of the text. A run of them a smallest
		// period apart is taken in one step, so that a text of many
		// copies costs no more than one pass.
		n, per := len(p.text), p.period
		for i := 0; i+n <= len(b); {
			j := bytes.Index(b[i:], p.text)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+n
			if per < n {
				e := end
				for e < len(b) && b[e] == b[e-per] {
					e++
				}
				end += (e - end) / per * per // the end of the run's last whole occurrence
			}
			spans = append(spans, span{start, end, p.name})
			i = end - n + per // no occurrence starts closer to the last one
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
