package secrets_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/secrets"
)

func TestParse(t *testing.T) {
	t.Parallel()
	file := strings.Join([]string{
		"\ufeff# keys for the nightly eval",
		"",
		"ANTHROPIC_API_KEY=sk-ant-0123456789",
		"export OPENAI_API_KEY=sk-openai-abcdef",
		"  SPACED  =  value with spaces  ",
		`DOUBLE="  quoted, spaces kept  "`,
		`SINGLE='it has a # and = inside'`,
		"HASH=abc#def",
		"PADDED=c2VjcmV0==",
		"WINDOWS=crlf-line\r",
		"export\tTABBED=tab-exported",
	}, "\n")
	s, err := secrets.Parse("test.env", strings.NewReader(file))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	want := map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-0123456789",
		"OPENAI_API_KEY":    "sk-openai-abcdef",
		"SPACED":            "value with spaces",
		"DOUBLE":            "  quoted, spaces kept  ",
		"SINGLE":            "it has a # and = inside",
		"HASH":              "abc#def",
		"PADDED":            "c2VjcmV0==",
		"WINDOWS":           "crlf-line",
		"TABBED":            "tab-exported",
	}
	if diff := cmp.Diff(want, s.Env()); diff != "" {
		t.Errorf("Parse(test.env).Env() mismatch (-want +got):\n%s", diff)
	}
	if got := s.Names(); len(got) != len(want) || got[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("Names() = %v, want the %d names sorted", got, len(want))
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-very-private"
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"no equals sign", "GOOD=fine-value\n" + secret + "\n", []string{"test.env:2:", "not a KEY=value line"}},
		{"bad name", "a/" + secret + "==\n", []string{"test.env:1:", "not a variable name"}},
		{"empty name", "=" + secret + "\n", []string{"test.env:1:", "not a variable name"}},
		{"name starts with a digit", "1KEY=" + secret + "\n", []string{"test.env:1:", "not a variable name"}},
		{"duplicate", "K=" + secret + "\n\nK=" + secret + "-2\n", []string{"test.env:3:", "K is set again (first on line 1)"}},
		{"short", "PIN=x9z\n", []string{"test.env:1:", "PIN", "shorter than 4 bytes"}},
		{"empty value", "EMPTY=\n", []string{"test.env:1:", "EMPTY has an empty value"}},
		{"open quote", `Q="` + secret + "\n", []string{"test.env:1:", "opens a quote"}},
		{"several", "BAD\nPIN=x9z\n", []string{"test.env:1:", "test.env:2:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := secrets.Parse("test.env", strings.NewReader(tt.file))
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want one", tt.file)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q) error = %q, want it to mention %q", tt.file, err, w)
				}
			}
			for _, leak := range []string{secret, "x9z"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("Parse(%q) error = %q shows a value", tt.file, err)
				}
			}
		})
	}
}

func TestParseStopsAfterTenErrors(t *testing.T) {
	t.Parallel()
	_, err := secrets.Parse("big.env", strings.NewReader(strings.Repeat("garbage\n", 1000)))
	if err == nil || strings.Count(err.Error(), "big.env:") != 10 || !strings.Contains(err.Error(), "more errors not shown") {
		t.Errorf("Parse(1000 bad lines) error = %v, want 10 lines and a note", err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	private := filepath.Join(dir, "private.env")
	shared := filepath.Join(dir, "shared.env")
	for _, p := range []string{private, shared} {
		if err := os.WriteFile(p, []byte("TOKEN=abcd-1234\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(shared, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := secrets.Load(private)
	if err != nil || len(s.Warnings()) != 0 {
		t.Errorf("Load(mode 0600) = warnings %v, err %v; want none", s.Warnings(), err)
	}
	s, err = secrets.Load(shared)
	if err != nil {
		t.Fatalf("Load(mode 0644) = %v", err)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "can be read by other users") || !strings.Contains(w[0], "chmod 600") {
		t.Errorf("Load(mode 0644) warnings = %q, want one about the mode", w)
	}
	if _, err := secrets.Load(filepath.Join(dir, "missing.env")); err == nil || !strings.Contains(err.Error(), "missing.env") {
		t.Errorf("Load(missing) = %v, want an error naming the file", err)
	}
	if _, err := secrets.Load(dir); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("Load(folder) = %v, want an error saying it is a folder", err)
	}
}

func TestAddRefuses(t *testing.T) {
	t.Parallel()
	s := secrets.New()
	for _, tt := range []struct{ name, value, want string }{
		{"9LIVES", "long-enough", "not a valid secret name"},
		{"with-dash", "long-enough", "not a valid secret name"},
		{"SHORT", "abc", "shorter than 4 bytes"},
		{"EMPTY", "", "empty value"},
		{"LINES", "line one\nline two", "line break"},
	} {
		err := s.Add(tt.name, tt.value)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Add(%q, …) = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	if s.Len() != 0 {
		t.Errorf("after refused Adds Len() = %d, want 0", s.Len())
	}
}

func newSet(t *testing.T, kv ...string) *secrets.Set {
	t.Helper()
	s := secrets.New()
	for i := 0; i < len(kv); i += 2 {
		if err := s.Add(kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  []string
		in   string
		want string
	}{
		{"none", []string{"K", "sk-1234"}, "nothing to see", "nothing to see"},
		{"twice", []string{"K", "sk-1234"}, "a sk-1234 b sk-1234", "a [redacted:K] b [redacted:K]"},
		{"adjacent", []string{"K", "sk-1234"}, "sk-1234sk-1234", "[redacted:K][redacted:K]"},
		{"contained value", []string{"SHORT", "long-value", "LONG", "secret-long-value"},
			"secret-long-value and long-value", "[redacted:LONG] and [redacted:SHORT]"},
		{"overlapping values", []string{"A", "abcdef12", "B", "ef12ghij"},
			"xxabcdef12ghijyy", "xx[redacted:A]yy"},
		// Every occurrence counts, overlapping ones too: no byte of one is left.
		{"repeated letters", []string{"A", "aaaa"}, "aaaaaaaaa", "[redacted:A]"},
		{"overlapping occurrences", []string{"A", "abab"}, "x ababab y abab", "x [redacted:A] y [redacted:A]"},
		{"url-escaped", []string{"K", "a+b/c=d e"}, "https://x.test/?key=a%2Bb%2Fc%3Dd+e", "https://x.test/?key=[redacted:K]"},
		{"empty set", nil, "sk-1234", "sk-1234"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := secrets.NewRedactor(newSet(t, tt.set...))
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := string(r.Bytes([]byte(tt.in))); got != tt.want {
				t.Errorf("Bytes(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactJSON(t *testing.T) {
	t.Parallel()
	// A value with every character JSON encoders escape in their own ways.
	const value = `p<a>s&s"w\o/rd` + "\t\x01é😀"
	r := secrets.NewRedactor(newSet(t, "PW", value))
	type doc struct {
		Text string `json:"text"`
	}
	once, err := json.Marshal(doc{Text: "before " + value + " after"})
	if err != nil {
		t.Fatal(err)
	}
	twice, err := json.Marshal(doc{Text: string(once)})
	if err != nil {
		t.Fatal(err)
	}
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	enc.Encode(doc{Text: value})
	python := []byte(`{"text": "p<a>s&s\"w\\o/rd\t\u0001\u00e9\ud83d\ude00"}`)
	javascript := []byte(`{"text":"p<a>s&s\"w\\o/rd\t\u0001é😀"}`)
	for _, tt := range []struct {
		name string
		in   []byte
	}{{"json.Marshal", once}, {"no HTML escaping", noHTML.Bytes()}, {"Python", python}, {"JavaScript", javascript}} {
		var got doc
		if err := json.Unmarshal(r.Bytes(tt.in), &got); err != nil {
			t.Fatalf("%s: redacted JSON does not parse: %v", tt.name, err)
		}
		if strings.Contains(got.Text, value) || !strings.Contains(got.Text, "[redacted:PW]") {
			t.Errorf("%s: redacted text = %q, want the value replaced", tt.name, got.Text)
		}
	}
	var outer doc
	if err := json.Unmarshal(r.Bytes(twice), &outer); err != nil {
		t.Fatalf("redacted double-encoded JSON does not parse: %v", err)
	}
	var inner doc
	if err := json.Unmarshal([]byte(outer.Text), &inner); err != nil {
		t.Fatalf("inner JSON does not parse after redaction: %v", err)
	}
	if want := "before [redacted:PW] after"; inner.Text != want {
		t.Errorf("double-encoded: inner text = %q, want %q", inner.Text, want)
	}
}

func TestAddAfterRedactor(t *testing.T) {
	t.Parallel()
	s := newSet(t, "FILE_KEY", "from-the-file")
	r := secrets.NewRedactor(s)
	if got := r.String("token-v1"); got != "token-v1" {
		t.Fatalf("String before Add = %q", got)
	}
	if err := s.Add("TOKEN", "token-v1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("TOKEN", "token-v2"); err != nil {
		t.Fatal(err)
	}
	if got, want := r.String("token-v1 token-v2 from-the-file"), "[redacted:TOKEN] [redacted:TOKEN] [redacted:FILE_KEY]"; got != want {
		t.Errorf("String after Add = %q, want %q", got, want)
	}
	if diff := cmp.Diff(map[string]string{"FILE_KEY": "from-the-file", "TOKEN": "token-v2"}, s.Env()); diff != "" {
		t.Errorf("Env() after replacing TOKEN (-want +got):\n%s", diff)
	}
}

func TestNilRedactor(t *testing.T) {
	t.Parallel()
	var r *secrets.Redactor
	if got := r.String("sk-1234"); got != "sk-1234" {
		t.Errorf("nil Redactor String = %q", got)
	}
	var b bytes.Buffer
	w := r.Writer(&b)
	w.Write([]byte("sk-1234"))
	w.Flush()
	if b.String() != "sk-1234" {
		t.Errorf("nil Redactor Writer wrote %q", b.String())
	}
	if got := secrets.NewRedactor(nil).String("abcd"); got != "abcd" {
		t.Errorf("Redactor of a nil Set String = %q", got)
	}
}

func TestWriter(t *testing.T) {
	t.Parallel()
	r := secrets.NewRedactor(newSet(t, "K", "sk-1234567"))
	var b bytes.Buffer
	w := r.Writer(&b)
	// The value arrives one byte at a time, then a line break.
	for _, c := range []byte("key sk-1234567 used") {
		w.Write([]byte{c})
	}
	if b.Len() != 0 {
		t.Errorf("Writer passed on %q before the line ended", b.String())
	}
	w.Write([]byte("\nprogress sk-12"))
	if got, want := b.String(), "key [redacted:K] used\n"; got != want {
		t.Errorf("after the first line Writer wrote %q, want %q", got, want)
	}
	w.Write([]byte("34567\rnext"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "key [redacted:K] used\nprogress [redacted:K]\rnext"; got != want {
		t.Errorf("Writer wrote %q, want %q", got, want)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Errorf("Write after Close = nil error, want ErrClosed")
	}
}

func TestWriterLongLine(t *testing.T) {
	t.Parallel()
	const value = "sk-0123456789abcdef"
	r := secrets.NewRedactor(newSet(t, "K", value))
	var b bytes.Buffer
	w := r.Writer(&b)
	// One line far longer than the Writer holds, written in pieces whose
	// boundaries fall inside values.
	line := strings.Repeat("x"+value+"yz", 20000)
	for i := 0; i < len(line); i += 7 {
		w.Write([]byte(line[i:min(i+7, len(line))]))
	}
	if b.Len() == 0 {
		t.Errorf("Writer held a %d-byte line whole; want it passed on in parts", len(line))
	}
	w.Flush()
	want := strings.Repeat("x[redacted:K]yz", 20000)
	if b.String() != want {
		t.Errorf("Writer output differs from the redacted line (lengths %d, %d); contains the value: %v", b.Len(), len(want), strings.Contains(b.String(), value))
	}
}

func TestWriterConcurrent(t *testing.T) {
	t.Parallel()
	r := secrets.NewRedactor(newSet(t, "K", "sk-1234567"))
	var b bytes.Buffer
	w := r.Writer(&b)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				w.Write([]byte("line with sk-1234567\n"))
			}
		})
	}
	wg.Wait()
	w.Flush()
	if got, want := b.String(), strings.Repeat("line with [redacted:K]\n", 800); got != want {
		t.Errorf("concurrent writes gave %d bytes, want %d, value present: %v", len(got), len(want), strings.Contains(got, "sk-1234567"))
	}
}

// BenchmarkRedact redacts 1 MiB of transcript-like text holding ten
// secrets. The cost grows with the length of the text times the number of
// distinct forms of the values.
func BenchmarkRedact(b *testing.B) {
	s := secrets.New()
	var text strings.Builder
	for i := range 10 {
		v := fmt.Sprintf("sk-%02d-0123456789abcdef", i)
		if err := s.Add(fmt.Sprintf("KEY_%d", i), v); err != nil {
			b.Fatal(err)
		}
		text.WriteString(`{"text":"` + v + `"}` + "\n")
	}
	for text.Len() < 1<<20 {
		text.WriteString(`{"role":"assistant","text":"The forecast for Oslo is rain on Tuesday."}` + "\n")
	}
	data := []byte(text.String())
	r := secrets.NewRedactor(s)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r.Bytes(data)
	}
}
