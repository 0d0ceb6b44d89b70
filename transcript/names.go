package transcript

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Renamed clients: names stored runs may hold, and what they are now.
// Readers map them; stored files are never rewritten.
var renamedClients = map[string]string{
	"mst":   "api",
	"codex": "codex-cli",
}

// CanonicalClient returns the current name of a client as a stored run
// recorded it: "mst" is api, "codex" is codex-cli, and chatgpt on its Codex
// surface is codex-app.
func CanonicalClient(name string, telemetry map[string]any) string {
	if n, ok := renamedClients[name]; ok {
		return n
	}
	if name == "chatgpt" && telemetry["surface"] == "codex" {
		return "codex-app"
	}
	return name
}

// Normalize brings a transcript read from disk to the current names: the
// old kind "mst.trace" and the old client names. It changes only the value
// in memory.
func (t *Transcript) Normalize() {
	if t.Kind == "mst.trace" || t.Kind == "" {
		t.Kind = "mst.transcript"
	}
	t.Client.Name = CanonicalClient(t.Client.Name, t.ClientTelemetry)
}

// Printable returns s safe to print on a terminal: control characters
// (C0, DEL, C1, so also tabs and newlines), the line and paragraph
// separators, the marks that reorder text (bidi controls), and bytes that
// are not UTF-8 are written as Go escapes (\x1b, \t, \u202e, \xff). Other
// text is kept as it is. Case ids, variant names and all other text of a
// dataset or config go through it before they reach a terminal: an id
// holding ESC [2J must not clear the screen.
func Printable(s string) string {
	i := strings.IndexFunc(s, unsafeRune)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for rest := s[i:]; rest != ""; {
		r, n := utf8.DecodeRuneInString(rest)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, rest[0])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == utf8.RuneError:
			b.WriteString(rest[:n]) // the character U+FFFD itself
		case unsafeRune(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(rest[:n])
		}
		rest = rest[n:]
	}
	return b.String()
}

// unsafeRune says whether r is escaped by Printable; utf8.RuneError stands
// for a byte that is not UTF-8 (and the character U+FFFD, which is kept).
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r), r == utf8.RuneError:
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', r == '\u2028', r == '\u2029',
		'\u202a' <= r && r <= '\u202e', '\u2066' <= r && r <= '\u2069':
		return true
	}
	return false
}
