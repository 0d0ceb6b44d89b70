package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
)

// badBytes are byte sequences that are not UTF-8: a Latin-1 letter, a
// lone continuation byte, an overlong encoding, a cut sequence and the
// encoding of a UTF-16 surrogate.
var badBytes = []string{"\xe9", "\x80", "\xc0\xaf", "\xe2\x82", "\xed\xa0\x80"}

// caseFile writes one case in format ext, with text placed in field
// (id, input, a metadata value or a grader's argument), and returns the
// file's content and the line and column where text begins.
func caseFile(ext, field, text string) (content string, line, col int) {
	id, input, meta, grader := "c1", "hello", "m", "x"
	switch field {
	case "id":
		id = text
	case "input":
		input = text
	case "metadata":
		meta = text
	case "expect":
		grader = text
	}
	switch ext {
	case ".jsonl":
		content = fmt.Sprintf(`{"id": "%s", "input": "%s", "metadata": {"k": "%s"}, "expect": {"answerContains": "%s"}}`+"\n", id, input, meta, grader)
	case ".json":
		content = fmt.Sprintf("[\n  {\"id\": \"%s\", \"input\": \"%s\", \"metadata\": {\"k\": \"%s\"}, \"expect\": {\"answerContains\": \"%s\"}}\n]\n", id, input, meta, grader)
	case ".yaml":
		content = fmt.Sprintf("- id: %s\n  input: %s\n  metadata: {k: %s}\n  expect: {answerContains: %s}\n", id, input, meta, grader)
	case ".csv":
		content = fmt.Sprintf("id,input,metadata.k,expect.answerContains\n%s,%s,%s,%s\n", id, input, meta, grader)
	}
	i := strings.Index(content, text)
	line, col = inputcheck.At([]byte(content), i)
	return content, line, col
}

// TestLoadRefusesInvalidUTF8 checks every format and field with every kind
// of bad byte: the file is refused at the place of the first bad byte.
func TestLoadRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".jsonl", ".json", ".yaml", ".csv"} {
		for _, field := range []string{"id", "input", "metadata", "expect"} {
			for _, bad := range badBytes {
				name := fmt.Sprintf("%s %s %q", ext, field, bad)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					content, line, col := caseFile(ext, field, "x"+bad+"y")
					_, err := Load(write(t, dir, "cases"+ext, content))
					want := []string{fmt.Sprintf("cases%s:%d: column %d: invalid UTF-8 (byte 0x%02x): a dataset is UTF-8 text; save the file as UTF-8", ext, line, col+1, bad[0])}
					if diff := cmp.Diff(want, errorLines(t, dir, err)); diff != "" {
						t.Errorf("mismatch (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// TestLoadRefusesLoneSurrogates checks the escapes that JSON and YAML
// would otherwise turn silently into U+FFFD.
func TestLoadRefusesLoneSurrogates(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".jsonl", ".json", ".yaml"} {
		for _, field := range []string{"id", "input", "metadata", "expect"} {
			for _, esc := range []string{`\ud800`, `\udfff`, `\ud83d\u0041`} {
				t.Run(fmt.Sprintf("%s %s %s", ext, field, esc), func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					text := esc
					if ext == ".yaml" {
						text = `"` + esc + `"`
					}
					content, line, _ := caseFile(ext, field, text)
					_, err := Load(write(t, dir, "cases"+ext, content))
					got := errorLines(t, dir, err)
					if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("cases%s:%d: ", ext, line)) || !strings.Contains(got[0], "half of a UTF-16 pair") {
						t.Errorf("Load = %q, want one error on line %d about half of a UTF-16 pair", got, line)
					}
				})
			}
		}
	}
}

func TestLoadMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, content string
		want                []string
	}{
		{"JSONL trailing comma", "cases.jsonl", `{"id": "a", "input": "x",}`, []string{"cases.jsonl:1: invalid JSON: a comma before } : JSON allows no comma after the last key; remove it (column 26)"}},
		{"JSONL missing comma", "cases.jsonl", `{"id": "a" "input": "x"}`, []string{`cases.jsonl:1: invalid JSON: expected , or } after the value, found '"' (is a comma missing?) (column 12)`}},
		{"JSON trailing comma in the list", "cases.json", "[\n  {\"id\": \"a\", \"input\": \"x\"},\n]\n", []string{"cases.json:3: invalid JSON: a comma before ] : JSON allows no comma after the last item; remove it"}},
		{"JSON missing comma between cases", "cases.json", "[\n  {\"id\": \"a\", \"input\": \"x\"}\n  {\"id\": \"b\", \"input\": \"y\"}\n]\n", []string{"cases.json:3: invalid JSON: expected , or ] after the list item, found '{' (is a comma missing?)"}},
		{"YAML tab indentation", "cases.yaml", "- id: a\n\tinput: x\n", []string{"cases.yaml:2: a tab in the indentation: YAML indents with spaces only; replace the tab with spaces"}},
		{"YAML duplicate key", "cases.yaml", "- id: a\n  input: x\n  id: b\n", []string{`cases.yaml:3: key "id" is given twice (first on line 1)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			_, err := Load(write(t, dir, tt.file, tt.content))
			if diff := cmp.Diff(tt.want, errorLines(t, dir, err)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadRefusesBinaryFiles gives a binary file under every extension.
func TestLoadRefusesBinaryFiles(t *testing.T) {
	t.Parallel()
	binaries := map[string]string{
		"ELF":  "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00",
		"PNG":  "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
		"gzip": "\x1f\x8b\x08\x00\x00\x00\x00\x00",
	}
	for _, ext := range []string{".jsonl", ".json", ".yaml", ".csv"} {
		for name, content := range binaries {
			t.Run(ext+" "+name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				_, err := Load(write(t, dir, "cases"+ext, content))
				got := errorLines(t, dir, err)
				if len(got) != 1 || !strings.HasPrefix(got[0], "cases"+ext+":") || !(strings.Contains(got[0], "not a text file") || strings.Contains(got[0], "invalid UTF-8")) {
					t.Errorf("Load = %q, want one error saying it is not text", got)
				}
			})
		}
	}
}

func TestLoadRefusesCostlyInput(t *testing.T) {
	t.Parallel()
	depthMsg := fmt.Sprintf("nested more than %d deep", inputcheck.MaxDepth)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	var laughs strings.Builder
	laughs.WriteString("- id: a\n  input: x\n  metadata:\n    x0: &x0 [lol]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&laughs, "    x%d: &x%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*x%d, ", i-1), 9), ", "))
	}
	tests := []struct{ name, file, content, want string }{
		{"JSONL deep", "cases.jsonl", `{"id": "a", "input": "x", "metadata": {"k": ` + deep(30000) + "}}\n", depthMsg},
		{"JSONL deep after an open string", "cases.jsonl", `{"id": "a", "input": "x` + "\n" + deep(30000) + "\n", depthMsg},
		{"JSON deep", "cases.json", `[{"id": "a", "input": "x", "metadata": {"k": ` + deep(inputcheck.MaxDepth) + "}}]\n", depthMsg},
		{"YAML flow deep", "cases.yaml", "- id: a\n  input: x\n  metadata: {k: " + deep(30000) + "}\n", depthMsg},
		{"YAML laughs", "cases.yaml", laughs.String(), fmt.Sprintf("more than %d values", inputcheck.MaxAliasNodes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			_, err := Load(write(t, dir, tt.file, tt.content))
			got := errorLines(t, dir, err)
			// The refusal comes last: a line before it may have its own problem.
			if len(got) == 0 || !strings.Contains(got[len(got)-1], tt.want) || !regexp.MustCompile(`^`+regexp.QuoteMeta(tt.file)+`:\d+: column \d+: `).MatchString(got[len(got)-1]) {
				t.Errorf("Load = %q, want an error with its place saying %q", got, tt.want)
			}
		})
	}
}

func TestLoadFileTooLarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cases.jsonl")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<40); err != nil {
		t.Fatalf("cannot make a sparse 1 TiB file to test the size bound: %v", err)
	}
	_, err := Load(path)
	want := path + ": file too large: the file is larger than 64 MiB, the most MST reads in a dataset; split the cases over several files"
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v, want %q", err, want)
	}
}
