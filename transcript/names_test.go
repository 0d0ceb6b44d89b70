package transcript

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestNormalizeOldNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind, client string
		telemetry    map[string]any
		wantClient   string
	}{
		{"mst.trace", "mst", nil, "api"},
		{"mst.transcript", "codex", nil, "codex-cli"},
		{"mst.transcript", "chatgpt", map[string]any{"surface": "codex"}, "codex-app"},
		{"mst.transcript", "chatgpt", nil, "chatgpt"},
		{"mst.transcript", "claude-code", nil, "claude-code"},
	}
	for _, tt := range tests {
		tr := &Transcript{Kind: tt.kind, Client: ClientInfo{Name: tt.client}, ClientTelemetry: tt.telemetry}
		tr.Normalize()
		if tr.Client.Name != tt.wantClient || tr.Kind != "mst.transcript" {
			t.Errorf("Normalize(%s, %s) = %s, %s; want mst.transcript, %s", tt.kind, tt.client, tr.Kind, tr.Client.Name, tt.wantClient)
		}
	}
}

// TestPrintable checks that what a terminal would obey is escaped and the
// rest kept.
func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain id":           "plain id",
		"東京の天気 🌦️ café":      "東京の天気 🌦️ café",
		`C:\x`:               `C:\x`,
		"\x1b[2J\x1b[H":      `\x1b[2J\x1b[H`,
		"a\tb\nc\rd\x00\x7f": `a\tb\nc\rd\x00\x7f`,
		"c1\u0085\u009b2J":   `c1\u0085\u009b2J`,
		"ab\u202ecd\u2066":   `ab\u202ecd\u2066`,
		"line\u2028sep":      `line\u2028sep`,
		"bad\xff\xfe\xc3":    `bad\xff\xfe\xc3`,
		"\ufffd kept":        "\ufffd kept",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	k := Key{Case: "\x1b[2J", Variant: "v\x07", Trial: 2}
	if got, want := k.String(), `v\x07/\x1b[2J#2`; got != want {
		t.Errorf("Key.String() = %q, want %q", got, want)
	}
}

// FuzzPrintable checks any text comes out as valid UTF-8 holding no
// character a terminal acts on, and that text without such characters is
// kept as it is.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[2J", "\u202e", "\xff", "\u0085", "東京\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Printable(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Printable(%q) = %q, not UTF-8", s, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("Printable(%q) = %q, which holds %U", s, got, r)
			}
		}
		if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool {
			return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
		}) < 0 && got != s {
			t.Fatalf("Printable(%q) = %q, want it kept", s, got)
		}
	})
}
