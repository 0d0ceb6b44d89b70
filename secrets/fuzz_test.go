package secrets

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// encodings are the ways a value can reach stored text, made with the
// encoders themselves where Go has them: as it is, inside JSON (escaping
// HTML or not, once or twice), in a URL, and, for a value that is not
// UTF-8, with its bad bytes replaced as Go, JavaScript and Python decoders
// replace them.
func encodings(v string) []string {
	marshal := func(s string, html bool) string {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(html)
		e.Encode(s)
		return strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n"), `"`)[1:]
	}
	out := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	for _, s := range []string{v, strings.ToValidUTF8(v, "\ufffd"), replaceBad(v)} {
		out = append(out, s)
		for _, html := range []bool{true, false} {
			once := marshal(s, html)
			out = append(out, once, marshal(once, html))
		}
		var js strings.Builder // JSON.stringify: only ", \ and controls
		for _, r := range s {
			switch {
			case r == '"' || r == '\\':
				js.WriteString(`\` + string(r))
			case r < 0x20:
				b, _ := json.Marshal(string(r))
				js.Write(b[1 : len(b)-1])
			default:
				js.WriteRune(r)
			}
		}
		out = append(out, js.String())
	}
	return out
}

// FuzzRedact checks that for any value of at least MinLength bytes without
// a line break, UTF-8 or not, every occurrence of every encoding of it in
// any text is covered by what Bytes replaces, so none of its bytes are
// left; that Bytes and String agree; and that nothing panics.
func FuzzRedact(f *testing.F) {
	for _, s := range [][3]string{
		{"sk-1234", "a ", " b"},
		{"aaaa", "aaaaa", "aaaa"},
		{"abab", "ab", "abab"},
		{`p<a>s&s"w\o/rd` + "\t\x01é😀", `{"text":"`, `"}`},
		{"sec\xffret", "x", "y"},
		{"\xe6\x9d\xb1\xe6\x9d", "[", "]"},
		{"\xff\xfe\xfd\xfc", "", ""},
		{"K]K]", "", "K]K]"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, v, before, after string) {
		set := New()
		if set.Add("K", v) != nil {
			return // a value a Set refuses is never redacted
		}
		r := NewRedactor(set)
		pats := r.patterns()
		for _, e := range encodings(v) {
			if e != v && !informative(e) {
				continue // mostly U+FFFD: it holds little of the value, and is not looked for
			}
			in := []byte(before + e + after)
			spans := find(in, pats)
			covered := make([]bool, len(in))
			for _, s := range spans {
				for i := s.start; i < s.end; i++ {
					covered[i] = true
				}
			}
			for i := 0; i+len(e) <= len(in); i++ {
				if !bytes.HasPrefix(in[i:], []byte(e)) {
					continue
				}
				for j := i; j < i+len(e); j++ {
					if !covered[j] {
						t.Fatalf("value %q, encoded %q, in %q: byte %d of the occurrence at %d is left in %q", v, e, in, j-i, i, r.Bytes(in))
					}
				}
			}
			got := r.Bytes(in)
			if s := r.String(string(in)); s != string(got) {
				t.Fatalf("String(%q) = %q, Bytes = %q", in, s, got)
			}
		}
	})
}

// FuzzWriter checks that a Writer passes on what Bytes gives for the whole
// text, however the text is cut into writes, and whether lines are short
// or longer than the Writer holds.
func FuzzWriter(f *testing.F) {
	for _, s := range [][2]string{
		{"sk-1234", "a sk-1234 b\nsk-12\r34 sk-1234"},
		{"aaaa", "aaaaaaaaa\naaa"},
		{"sec\xffret", "x\"sec\\ufffdret\" sec\xffret"},
		{"abcdefgh", strings.Repeat("abcdefg", 9) + "h"},
	} {
		f.Add(s[0], s[1], uint8(0))
	}
	f.Fuzz(func(t *testing.T, v, text string, limit uint8) {
		set := New()
		if set.Add("K", v) != nil || len(text) > 512 {
			return
		}
		r := NewRedactor(set)
		want := r.Bytes([]byte(text))
		for at := 0; at <= len(text); at++ {
			var out bytes.Buffer
			w := r.Writer(&out)
			w.limit = int(limit) // 0: the default
			for _, part := range []string{text[:at], text[at:]} {
				if n, err := w.Write([]byte(part)); n != len(part) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("value %q, text %q written in two at %d (limit %d): got %q, want %q", v, text, at, limit, out.Bytes(), want)
			}
		}
	})
}

// TestReplaceBad checks the replacement of bytes that are not UTF-8 the
// way the WHATWG decoder of browsers and Node does it: one U+FFFD for each
// longest start of a character that cannot be finished.
func TestReplaceBad(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ok é 東":                            "ok é 東",
		"\xe6\x9d":                          "\ufffd",
		"a\xe6\x9dz":                        "a\ufffdz",
		"\xf0\x80\x80":                      "\ufffd\ufffd\ufffd",
		"\xf0\x9f\x98":                      "\ufffd",
		"\xed\xa0\x80":                      "\ufffd\ufffd\ufffd",
		"\xc0\xaf":                          "\ufffd\ufffd",
		"\xff\xfe":                          "\ufffd\ufffd",
		"\xe1\x80\xe2\xf0\x91\x92\xf1\xbfA": "\ufffd\ufffd\ufffd\ufffdA",
	} {
		if got := replaceBad(in); got != want {
			t.Errorf("replaceBad(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkRedactRepeated redacts a text made of one long, periodic value
// over and over, each copy overlapping the next: it takes one pass, not
// one per copy.
func BenchmarkRedactRepeated(b *testing.B) {
	set := New()
	if err := set.Add("K", strings.Repeat("ab", 500)); err != nil {
		b.Fatal(err)
	}
	r := NewRedactor(set)
	text := []byte(strings.Repeat("ab", 1<<19) + "tail")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		r.Bytes(text)
	}
}
