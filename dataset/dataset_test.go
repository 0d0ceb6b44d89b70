package dataset

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// write creates the file name with content in dir and returns its path.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// relative removes dir from the sources of cases, so wants can name files
// by their base name.
func relative(dir string, cases []Case) []Case {
	for i := range cases {
		cases[i].Source = strings.TrimPrefix(cases[i].Source, dir+string(filepath.Separator))
	}
	return cases
}

// errorLines returns err's lines with dir removed from the file names.
func errorLines(t *testing.T, dir string, err error) []string {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v is %T, want Errors", err, err)
	}
	var lines []string
	for _, e := range es {
		lines = append(lines, strings.ReplaceAll(e.Error(), dir+string(filepath.Separator), ""))
	}
	return lines
}

func raws(specs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(specs))
	for i, s := range specs {
		out[i] = json.RawMessage(s)
	}
	return out
}

// rawString compares RawMessages as text.
var rawString = cmp.Transformer("raw", func(r json.RawMessage) string { return string(r) })

const paris = "  What is the weather in Paris?\n"

func TestLoadFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, content string
		want                []Case
	}{
		{
			name: "jsonl",
			file: "cases.jsonl",
			content: `{"id": "c1", "input": "  What is the weather in Paris?\n", "expect": [{"answerContains": "Paris"}, {"toolCalled": "get_forecast"}], "metadata": {"difficulty": 2, "tag": "city"}}

{"id": 7, "input": "Hi <b>", "expect": {"maxToolCalls": 3}}` + "\r\n   \n",
			want: []Case{
				{ID: "c1", Input: paris, Expect: raws(`{"answerContains":"Paris"}`, `{"toolCalled":"get_forecast"}`), Metadata: map[string]any{"difficulty": json.Number("2"), "tag": "city"}, Source: "cases.jsonl:1"},
				{ID: "7", Input: "Hi <b>", Expect: raws(`{"maxToolCalls":3}`), Source: "cases.jsonl:3"},
			},
		},
		{
			name: "json",
			file: "cases.json",
			content: `[
  {"id": "c1", "input": "  What is the weather in Paris?\n", "expect": [{"answerContains": "Paris"}, {"toolCalled": "get_forecast"}], "metadata": {"difficulty": 2, "tag": "city"}},
  {
    "id": 7, "input": "Hi <b>", "expect": {"maxToolCalls": 3}
  }
]
`,
			want: []Case{
				{ID: "c1", Input: paris, Expect: raws(`{"answerContains":"Paris"}`, `{"toolCalled":"get_forecast"}`), Metadata: map[string]any{"difficulty": json.Number("2"), "tag": "city"}, Source: "cases.json:2"},
				{ID: "7", Input: "Hi <b>", Expect: raws(`{"maxToolCalls":3}`), Source: "cases.json:3"},
			},
		},
		{
			name: "yaml",
			file: "cases.yaml",
			content: `# Two cases.
- id: c1
  input: "  What is the weather in Paris?\n"
  expect:
    - answerContains: Paris
    - toolCalled: get_forecast
  metadata: {difficulty: 2, tag: city}
- id: 7
  input: Hi <b>
  expect: {maxToolCalls: 3}
- id: block
  input: |
    line one
      indented
`,
			want: []Case{
				{ID: "c1", Input: paris, Expect: raws(`{"answerContains":"Paris"}`, `{"toolCalled":"get_forecast"}`), Metadata: map[string]any{"difficulty": json.Number("2"), "tag": "city"}, Source: "cases.yaml:2"},
				{ID: "7", Input: "Hi <b>", Expect: raws(`{"maxToolCalls":3}`), Source: "cases.yaml:8"},
				{ID: "block", Input: "line one\n  indented\n", Source: "cases.yaml:11"},
			},
		},
		{
			name: "yml flow",
			file: "cases.yml",
			content: `[{id: c1, input: "  What is the weather in Paris?\n"}]
`,
			want: []Case{{ID: "c1", Input: paris, Source: "cases.yml:1"}},
		},
		{
			name: "csv",
			file: "cases.csv",
			content: "\ufeffid,input,expect.answerContains,expect.toolCalled,expect.maxToolCalls,metadata.tag\n" +
				"c1,\"  What is the weather in Paris?\n\",Paris,get_forecast,,city\n" +
				"7,Hi <b>,,,3,\n" +
				",,,,,\n" +
				"c3, padded ,,, 2 ,\n",
			want: []Case{
				{ID: "c1", Input: paris, Expect: raws(`{"answerContains":"Paris"}`, `{"toolCalled":"get_forecast"}`), Metadata: map[string]any{"tag": "city"}, Source: "cases.csv:2"},
				{ID: "7", Input: "Hi <b>", Expect: raws(`{"maxToolCalls":3}`), Source: "cases.csv:4"},
				{ID: "c3", Input: " padded ", Expect: raws(`{"maxToolCalls":2}`), Source: "cases.csv:6"},
			},
		},
		{
			name:    "csv with CRLF and only the required columns",
			file:    "crlf.csv",
			content: "input,id\r\nHello there ,a\r\n",
			want:    []Case{{ID: "a", Input: "Hello there ", Source: "crlf.csv:2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			got, err := Load(write(t, dir, tt.file, tt.content))
			if err != nil {
				t.Fatalf("Load(%s) failed:\n%v", tt.file, err)
			}
			if diff := cmp.Diff(tt.want, relative(dir, got), rawString); diff != "" {
				t.Errorf("Load(%s) mismatch (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, content string
		want                []string
	}{
		// Object cases, shown in JSONL.
		{"blank input", "cases.jsonl", `{"id": "c4", "input": " \n\t "}`, []string{`cases.jsonl:1: case "c4": input is blank`}},
		{"empty input", "cases.jsonl", `{"id": "c4", "input": ""}`, []string{`cases.jsonl:1: case "c4": input is blank`}},
		{"missing input", "cases.jsonl", `{"id": "c4"}`, []string{`cases.jsonl:1: case "c4": missing input`}},
		{"input not a string", "cases.jsonl", `{"id": "c4", "input": 5}`, []string{`cases.jsonl:1: case "c4": input must be a string, got number 5`}},
		{"missing id", "cases.jsonl", `{"input": "hi"}`, []string{"cases.jsonl:1: missing id"}},
		{"blank id", "cases.jsonl", `{"id": "  ", "input": "hi"}`, []string{"cases.jsonl:1: id is blank"}},
		{"fractional id", "cases.jsonl", `{"id": 1.5, "input": "hi"}`, []string{"cases.jsonl:1: id must be a string or a whole number, got number 1.5"}},
		{"boolean id", "cases.jsonl", `{"id": true, "input": "hi"}`, []string{"cases.jsonl:1: id must be a string or a whole number, got boolean true"}},
		{"unknown keys", "cases.jsonl", `{"id": "c1", "inptu": "hi", "zzz": 1}`, []string{
			`cases.jsonl:1: case "c1": unknown key "inptu" (did you mean input?)`,
			`cases.jsonl:1: case "c1": unknown key "zzz"`,
			`cases.jsonl:1: case "c1": missing input`,
		}},
		{"expect item not an object", "cases.jsonl", `{"id": "c1", "input": "hi", "expect": [{"answerContains": "x"}, "x"]}`, []string{
			`cases.jsonl:1: case "c1": expect[1] must be a grader object such as {"answerContains": "…"}, got string "x"`,
		}},
		{"expect not an object", "cases.jsonl", `{"id": "c1", "input": "hi", "expect": "x"}`, []string{
			`cases.jsonl:1: case "c1": expect must be a grader object such as {"answerContains": "…"}, got string "x"`,
		}},
		{"metadata not an object", "cases.jsonl", `{"id": "c1", "input": "hi", "metadata": ["x"]}`, []string{
			`cases.jsonl:1: case "c1": metadata must be an object, got a list`,
		}},
		{"not an object", "cases.jsonl", `["c1", "hi"]`, []string{"cases.jsonl:1: a case must be an object with id and input, got a list"}},
		{"invalid JSON", "cases.jsonl", "{\"id\": \"c1\", \"input\": \"hi\"}\n{\"id\": c2}\n", []string{
			"cases.jsonl:2: invalid JSON: expected a value (a string in double quotes, a number, true, false, null, an object or a list), found 'c' (column 8)",
		}},
		{"unclosed JSON", "cases.jsonl", `{"id": "c1", "input": "hi"`, []string{"cases.jsonl:1: invalid JSON: unexpected end (a bracket or quote is not closed) (column 26)"}},
		{"two values on a line", "cases.jsonl", `{"id": "c1", "input": "hi"} {}`, []string{"cases.jsonl:1: invalid JSON: more than one JSON value on the line (one case per line)"}},
		{"duplicate key", "cases.jsonl", `{"id": "c1", "input": "hi", "id": "c2"}`, []string{`cases.jsonl:1: invalid JSON: key "id" is given twice`}},
		{"duplicate ids", "cases.jsonl", "{\"id\": \"a\", \"input\": \"x\"}\n{\"id\": \"b\", \"input\": \"x\"}\n{\"id\": \"a\", \"input\": \" \"}\n", []string{
			`cases.jsonl:3: case "a": input is blank`,
			`cases.jsonl:3: case "a": duplicate id (first at cases.jsonl:1)`,
		}},
		{"number and string ids collide", "cases.jsonl", "{\"id\": 1, \"input\": \"x\"}\n{\"id\": \"1\", \"input\": \"x\"}\n", []string{
			`cases.jsonl:2: case "1": duplicate id (first at cases.jsonl:1)`,
		}},
		{"every problem of the file", "cases.jsonl", "{\"id\": \"c1\", \"input\": \"\"}\nnot json\n\n{\"input\": \"x\"}\n{\"id\": \"c4\", \"input\": \"  \"}\n", []string{
			`cases.jsonl:1: case "c1": input is blank`,
			"cases.jsonl:2: invalid JSON: an unknown word: a string takes double quotes; the words JSON knows are true, false and null (column 2)",
			"cases.jsonl:4: missing id",
			`cases.jsonl:5: case "c4": input is blank`,
		}},
		{"empty JSONL", "cases.jsonl", "\n  \n", []string{"cases.jsonl: holds no cases"}},

		// JSON files.
		{"JSON object", "cases.json", `{"id": "c1", "input": "hi"}`, []string{
			`cases.json:1: a .json dataset must be a list of cases, [{"id": …, "input": …}, …] (for one object per line, name the file .jsonl)`,
		}},
		{"JSON item problems", "cases.json", "[\n  {\"id\": \"c1\", \"input\": \"hi\"},\n  \"c2\",\n  {\"id\": \"c3\", \"input\": \"\"}\n]", []string{
			`cases.json:3: a case must be an object with id and input, got string "c2"`,
			`cases.json:4: case "c3": input is blank`,
		}},
		{"JSON syntax", "cases.json", "[\n  {\"id\": \"c1\", \"input\": \"hi\"},\n  {\"id\": \"c2\" \"input\": \"hi\"}\n]", []string{
			"cases.json:3: invalid JSON: expected , or } after the value, found '\"' (is a comma missing?)",
		}},
		{"JSON trailing text", "cases.json", "[{\"id\": \"c1\", \"input\": \"hi\"}]\n]", []string{"cases.json:2: invalid JSON: unexpected text after the list of cases"}},
		{"empty JSON list", "cases.json", "[]", []string{"cases.json: holds no cases"}},

		// YAML files.
		{"YAML mapping", "cases.yaml", "id: c1\ninput: hi\n", []string{"cases.yaml:1: a YAML dataset must be a list of cases, each with id and input, got an object"}},
		{"YAML item problems", "cases.yaml", "- id: c1\n  input: \"   \"\n- id: c2\n  input: hi\n  expect: [x]\n- plain\n", []string{
			`cases.yaml:1: case "c1": input is blank`,
			`cases.yaml:3: case "c2": expect[0] must be a grader object such as {"answerContains": "…"}, got string "x"`,
			`cases.yaml:6: a case must be an object with id and input, got string "plain"`,
		}},
		{"YAML syntax", "cases.yaml", "- id: c1\n  input: [hi\n", []string{"cases.yaml:2: a list opened with [ is not closed with ]"}},
		{"YAML documents", "cases.yaml", "- {id: a, input: x}\n---\n- {id: b, input: y}\n", []string{"cases.yaml:3: the file holds 2 YAML documents; put all cases in one list"}},
		{"empty YAML", "cases.yaml", "# none yet\n", []string{"cases.yaml: holds no cases"}},

		// CSV files.
		{"CSV missing columns", "cases.csv", "prompt\nhi\n", []string{
			`cases.csv:1: unknown column "prompt": columns are id, input, model, expect.<grader> and metadata.<key>`,
			`cases.csv:1: missing column "id" (the first row names the columns)`,
			`cases.csv:1: missing column "input" (the first row names the columns)`,
		}},
		{"CSV bad columns", "cases.csv", "id,inptu,input,expect.answerContain,expect.judge,metadata.,id\n", []string{
			`cases.csv:1: unknown column "inptu" (did you mean input?): columns are id, input, model, expect.<grader> and metadata.<key>`,
			`cases.csv:1: column "expect.answerContain": a CSV column can hold only the graders answerContains, answerMatches, maxToolCalls, toolCalled, toolNotCalled (did you mean answerContains?)`,
			`cases.csv:1: column "expect.judge": a CSV column can hold only the graders answerContains, answerMatches, maxToolCalls, toolCalled, toolNotCalled`,
			`cases.csv:1: column "metadata.": name the metadata key after the dot`,
			`cases.csv:1: column "id" appears twice`,
		}},
		{"CSV record problems", "cases.csv", "id,input,expect.maxToolCalls\nc1, ,\n,hi,\nc3,hi,many\nc4,hi\nc1,hi,1\n", []string{
			`cases.csv:2: case "c1": input is blank`,
			"cases.csv:3: missing id",
			`cases.csv:4: case "c3": expect.maxToolCalls must be a whole number, got "many"`,
			"cases.csv:5: the record has 2 cells but the header names 3 columns",
			`cases.csv:6: case "c1": duplicate id (first at cases.csv:2)`,
		}},
		{"CSV broken quote", "cases.csv", "id,input\nc1,\"hi\nc2,there\n", []string{`cases.csv:2: a quote is left open: the row that starts here runs on to line 3, column 10; close the quoted field with ", and write "" for a quote inside it`}},
		{"CSV stray quote", "cases.csv", "id,input\nc1,h\"i\n", []string{`cases.csv:2: column 5: a quote inside a field that does not start with one: put the whole field in quotes and write "" for each quote inside it ("say ""hi""")`}},
		{"CSV header only", "cases.csv", "id,input\n", []string{"cases.csv: holds no cases"}},
		{"empty CSV", "cases.csv", "", []string{"cases.csv: holds no cases"}},

		{"unsupported format", "cases.txt", "hi\n", []string{`cases.txt: unsupported dataset format ".txt": use .jsonl, .json, .yaml, .yml or .csv`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cases, err := Load(write(t, dir, tt.file, tt.content))
			if err == nil {
				t.Fatalf("Load(%s) = %v, want errors", tt.file, cases)
			}
			if cases != nil {
				t.Errorf("Load(%s) returned %d cases with its errors, want none", tt.file, len(cases))
			}
			if diff := cmp.Diff(tt.want, errorLines(t, dir, err)); diff != "" {
				t.Errorf("Load(%s) errors mismatch (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

func TestLoadFileProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "cases.jsonl"), "cases.jsonl: no such file"},
		{"folder", dir, ": is a folder, not a case file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(tt.path)
			if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
				t.Errorf("Load(%s) = %v, want an error ending %q", tt.path, err, tt.want)
			}
		})
	}
}

func TestLoadAll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := write(t, dir, "a.jsonl", "{\"id\": \"a1\", \"input\": \"x\"}\n{\"id\": \"shared\", \"input\": \"x\"}\n")
	b := write(t, dir, "b.yaml", "- {id: b1, input: y}\n")
	c := write(t, dir, "c.csv", "id,input\nc1,z\nshared,z\n")
	bad := write(t, dir, "d.jsonl", "{\"id\": \"d1\", \"input\": \"\"}\n")

	got, err := LoadAll([]string{a, b})
	if err != nil {
		t.Fatalf("LoadAll(a, b) failed:\n%v", err)
	}
	want := []Case{
		{ID: "a1", Input: "x", Source: "a.jsonl:1"},
		{ID: "shared", Input: "x", Source: "a.jsonl:2"},
		{ID: "b1", Input: "y", Source: "b.yaml:1"},
	}
	if diff := cmp.Diff(want, relative(dir, got)); diff != "" {
		t.Errorf("LoadAll(a, b) mismatch (-want +got):\n%s", diff)
	}

	_, err = LoadAll([]string{bad, a, c})
	wantErrs := []string{
		`d.jsonl:1: case "d1": input is blank`,
		`c.csv:3: case "shared": duplicate id (first at a.jsonl:2)`,
	}
	if diff := cmp.Diff(wantErrs, errorLines(t, dir, err)); diff != "" {
		t.Errorf("LoadAll(d, a, c) errors mismatch (-want +got):\n%s", diff)
	}

	if _, err := LoadAll(nil); err == nil {
		t.Errorf("LoadAll(nil) = nil error, want one")
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	cases := []Case{{ID: "c1"}, {ID: "c2"}, {ID: "c3"}, {ID: "weather-paris"}}
	tests := []struct {
		name    string
		ids     []string
		limit   int
		want    []string
		wantErr string
	}{
		{name: "all", want: []string{"c1", "c2", "c3", "weather-paris"}},
		{name: "limit", limit: 2, want: []string{"c1", "c2"}},
		{name: "limit above count", limit: 10, want: []string{"c1", "c2", "c3", "weather-paris"}},
		{name: "ids keep dataset order", ids: []string{"c3", "c1", "c3"}, want: []string{"c1", "c3"}},
		{name: "ids then limit", ids: []string{"c3", "c2", "c1"}, limit: 1, want: []string{"c1"}},
		{name: "unknown ids", ids: []string{"c4", "weather-pari", "zzz", "c1"}, wantErr: "unknown case \"c4\" (did you mean c1 or c2 or c3?)\nunknown case \"weather-pari\" (did you mean weather-paris?)\nunknown case \"zzz\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Select(cases, tt.ids, tt.limit)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("Select(%v, %d) error = %v, want %q", tt.ids, tt.limit, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Select(%v, %d) failed: %v", tt.ids, tt.limit, err)
			}
			var ids []string
			for _, c := range got {
				ids = append(ids, c.ID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("Select(%v, %d) mismatch (-want +got):\n%s", tt.ids, tt.limit, diff)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "cases.jsonl", Line: 4, Case: "c4", Msg: "input is blank"}, `cases.jsonl:4: case "c4": input is blank`},
		{Error{File: "cases.jsonl", Line: 4, Msg: "missing id"}, "cases.jsonl:4: missing id"},
		{Error{File: "cases.jsonl", Msg: "no such file"}, "cases.jsonl: no such file"},
		{Error{Msg: `unknown case "x"`}, `unknown case "x"`},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%#v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}
