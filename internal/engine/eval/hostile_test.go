package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
)

// laughs is a "billion laughs" YAML config: levels anchors, each a list
// of width aliases of the one before. Expanded it has width^levels items.
func laughs(levels, width int) string {
	var b strings.Builder
	b.WriteString("name: t\nx0: &x0 [lol]\n")
	for i := 1; i <= levels; i++ {
		items := make([]string, width)
		for j := range items {
			items[j] = fmt.Sprintf("*x%d", i-1)
		}
		fmt.Fprintf(&b, "x%d: &x%d [%s]\n", i, i, strings.Join(items, ", "))
	}
	return b.String()
}

// nested returns a value nested depth deep in the given style.
func nested(style string, depth int) string {
	switch style {
	case "json list":
		return strings.Repeat("[", depth) + strings.Repeat("]", depth)
	case "json object":
		return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
	case "yaml flow":
		return strings.Repeat("{a: [", depth/2) + strings.Repeat("]}", depth/2)
	case "yaml block":
		var b strings.Builder
		for i := range depth {
			fmt.Fprintf(&b, "\n%sa:", strings.Repeat(" ", i+2))
		}
		return b.String() + " 1"
	}
	panic(style)
}

func TestLoadRefusesCostlyInput(t *testing.T) {
	t.Parallel()
	depthMsg := fmt.Sprintf("nested more than %d deep", inputcheck.MaxDepth)
	aliasMsg := fmt.Sprintf("more than %d values", inputcheck.MaxAliasNodes)
	type tc struct {
		name, file, content, want string
	}
	var tests []tc
	for _, lw := range [][2]int{{9, 9}, {4, 20}, {2, 100}, {30, 2}} {
		tests = append(tests, tc{fmt.Sprintf("laughs %dx%d", lw[0], lw[1]), "eval.yaml", laughs(lw[0], lw[1]), aliasMsg})
	}
	// A merge key expands too.
	merge := "name: t\na: &a {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8, k8: 9, k9: 10}\n"
	for i := range 700 {
		merge += fmt.Sprintf("m%d: {<<: *a}\n", i)
	}
	tests = append(tests, tc{"merge keys", "eval.yaml", merge, aliasMsg})
	// An alias may not nest a deep anchor deeper still.
	deepAnchor := "name: t\na: &a " + nested("yaml flow", inputcheck.MaxDepth-4) + "\nb: " + strings.Repeat("[", 10) + "*a" + strings.Repeat("]", 10) + "\n"
	tests = append(tests, tc{"alias deeper than the bound", "eval.yaml", deepAnchor, depthMsg})
	for _, style := range []string{"json list", "json object"} {
		for _, depth := range []int{inputcheck.MaxDepth + 1, 30_000} {
			tests = append(tests, tc{fmt.Sprintf("%s %d deep", style, depth), "eval.json", `{"name": ` + nested(style, depth) + "}", depthMsg})
		}
	}
	for _, style := range []string{"yaml flow", "yaml block"} {
		for _, depth := range []int{inputcheck.MaxDepth + 2, 2000} {
			tests = append(tests, tc{fmt.Sprintf("%s %d deep", style, depth), "eval.yaml", "name: " + nested(style, depth) + "\n", depthMsg})
		}
	}
	tests = append(tests, tc{"too large", "eval.yaml", "name: t\n#" + strings.Repeat("x", inputcheck.MaxConfigBytes) + "\n", "larger than 4 MiB"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := loadErrors(t, tt.file, tt.content)
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Fatalf("Load = %q, want one error saying %q", got, tt.want)
			}
			// The place is given, except for a file too large to read.
			if !strings.HasPrefix(got[0], tt.file+":") || (tt.name != "too large" && !strings.HasPrefix(strings.TrimLeft(got[0][len(tt.file)+1:], "0123456789"), ":")) {
				t.Errorf("error %q does not give the line", got[0])
			}
		})
	}
}

// TestLoadAcceptsWithinBounds checks that the bounds refuse only what is
// over them: nesting of MaxDepth and a few aliases are read.
func TestLoadAcceptsWithinBounds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, file, content string }{
		{"json at the depth bound", "eval.json", `{"name": "t", "x-nest": ` + nested("json list", inputcheck.MaxDepth-1) + "}"},
		{"yaml at the depth bound", "eval.yaml", "name: t\nx-nest: " + nested("yaml flow", inputcheck.MaxDepth-2) + "\n"},
		{"aliases within the bound", "eval.yaml", laughs(3, 10)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, line := range loadErrors(t, tt.file, tt.content) {
				if strings.Contains(line, "nested") || strings.Contains(line, "alias") {
					t.Errorf("Load refused input within the bounds: %s", line)
				}
			}
		})
	}
}

// TestLoadMessages checks that the common mistakes are told in MST's
// words, with the file, line, column and path, never a parser's.
func TestLoadMessages(t *testing.T) {
	t.Parallel()
	const rest = "datasets: [cases.jsonl]\nservers:\n  w: {command: node}\nvariants:\n  v: {model: offline}\n"
	tests := []struct {
		name, file, content string
		want                []string
	}{
		{"JSON trailing comma in an object", "eval.json", "{\"name\": \"t\",\n \"trials\": 3,\n}", []string{"eval.json:3:1: a comma before } : JSON allows no comma after the last key; remove it"}},
		{"JSON trailing comma in a list", "eval.json", `{"name": "t", "datasets": ["a", "b",]}`, []string{"eval.json:1:37: a comma before ] : JSON allows no comma after the last item; remove it"}},
		{"JSON missing comma in an object", "eval.json", "{\"name\": \"t\"\n \"trials\": 3}", []string{`eval.json:2:2: expected , or } after the value, found '"' (is a comma missing?)`}},
		{"JSON missing comma in a list", "eval.json", `{"name": "t", "datasets": ["a" "b"]}`, []string{`eval.json:1:32: expected , or ] after the list item, found '"' (is a comma missing?)`}},
		{"JSON single quotes", "eval.json", `{"name": 't'}`, []string{"eval.json:1:10: expected a value, found a single quote: JSON strings take double quotes"}},
		{"JSON unquoted key", "eval.json", `{name: "t"}`, []string{"eval.json:1:2: expected a key in double quotes, found 'n'"}},
		{"JSON bare word", "eval.json", `{"name": t}`, []string{"eval.json:1:11: an unknown word: a string takes double quotes; the words JSON knows are true, false and null"}},
		{"JSON line break in a string", "eval.json", "{\"name\": \"t\nu\"}", []string{"eval.json:1:12: a control character (such as a tab or a line break) inside a string: write it as an escape such as \\t or \\n"}},
		{"JSON lone surrogate", "eval.json", `{"name": "a\ud800b"}`, []string{`eval.json:1:12: the escape \ud800 is half of a UTF-16 pair and stands for no character: the text would not be valid UTF-8`}},
		{"YAML tab indentation", "eval.yaml", "name: t\nservers:\n\tw: {command: node}\n", []string{"eval.yaml:3:1: a tab in the indentation: YAML indents with spaces only; replace the tab with spaces"}},
		{"YAML unclosed list", "eval.yaml", "name: t\ndatasets: [a, b\n", []string{"eval.yaml:2:11: a list opened with [ is not closed with ]"}},
		{"YAML surrogate escape", "eval.yaml", "name: \"a\\ud800\"\n", []string{"eval.yaml:1:9: a \\u escape that is half of a UTF-16 pair and stands for no character: the text would not be valid UTF-8"}},
		{"YAML low surrogate escape", "eval.yaml", "name: t\ndescription: \"ok \\udc00\"\n", []string{"eval.yaml:2:14: the escape \\udc00 is half of a UTF-16 pair and stands for no character: the text would not be valid UTF-8"}},
		{"timeout without a unit", "eval.yaml", "name: t\ndatasets: [cases.jsonl]\nservers:\n  w: {command: node, startupTimeout: 90}\nvariants:\n  v: {model: offline, clientOptions: {timeout: 90}}\n", []string{
			"eval.yaml:4:22: servers.w.startupTimeout: must be a duration with its unit, such as 90s or 2m, got the bare number 90 (write 90s for seconds)",
			"eval.yaml:6:39: variants.v.clientOptions.timeout: must be a duration with its unit, such as 90s or 2m, got the bare number 90 (write 90s for seconds)",
		}},
		{"binary file", "eval.yaml", "\x7fELF\x02\x01\x01\x00\x00\x00", []string{"eval.yaml:1:8: this is not a text file (it holds a NUL byte): a config is UTF-8 text"}},
		{"invalid UTF-8 in a value", "eval.yaml", "name: t\ndescription: caf\xe9\n" + rest, []string{"eval.yaml:2:17: invalid UTF-8 (byte 0xe9): a config is UTF-8 text; save the file as UTF-8"}},
		{"overlong UTF-8", "eval.json", "{\"name\": \"\xc0\xaf\"}", []string{"eval.json:1:11: invalid UTF-8 (byte 0xc0): a config is UTF-8 text; save the file as UTF-8"}},
		{"UTF-8 of a surrogate", "eval.yaml", "name: t\n# \xed\xa0\x80\n", []string{"eval.yaml:2:3: invalid UTF-8 (byte 0xed): a config is UTF-8 text; save the file as UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := loadErrors(t, tt.file, tt.content)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadFileTooLarge checks that a config over the bound is refused
// before it is read whole.
func TestLoadFileTooLarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "eval.yaml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<40); err != nil {
		t.Fatalf("cannot make a sparse 1 TiB file to test the size bound: %v", err)
	}
	_, err := Load(path, fakeCatalog{})
	want := path + ": file too large: the file is larger than 4 MiB, the most MST reads in a config"
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v, want %q", err, want)
	}
}
