package dataset

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzRead reads data as the dataset file and checks what every input
// must give: cases that hold to Case's promises, or MST's errors, each
// with its file and a message, none in encoding/json's words.
func fuzzRead(t *testing.T, file string, data []byte) {
	r := &reader{file: file}
	r.readData(data)
	for _, e := range r.errs {
		if e.File != file || strings.TrimSpace(e.Msg) == "" {
			t.Fatalf("error without its file or message: %#v", e)
		}
		if strings.Contains(e.Msg, "invalid character") || strings.Contains(e.Msg, "looking for beginning") {
			t.Fatalf("a parser's words reach the user: %s", e.Msg)
		}
	}
	if len(r.errs) > 0 {
		return
	}
	if len(r.cases) == 0 {
		t.Fatal("no cases and no error")
	}
	for _, c := range r.cases {
		if strings.TrimSpace(c.ID) == "" || strings.TrimSpace(c.Input) == "" {
			t.Fatalf("case with a blank id or input: %#v", c)
		}
		if !utf8.ValidString(c.ID) || !utf8.ValidString(c.Input) || !utf8.ValidString(c.Model) {
			t.Fatalf("case with text that is not UTF-8: %#v", c)
		}
	}
}

func FuzzReadJSONL(f *testing.F) {
	for _, s := range []string{
		`{"id": "a", "input": "x", "expect": [{"answerContains": "y"}], "metadata": {"k": 1}}` + "\n" + `{"id": 2, "input": "z"}`,
		`{"id": "a", "input": "x",}`,
		`{"id": "a" "input": "x"}`,
		`{"id": "a", "input": "\ud800"}`,
		"{\"id\": \"a\", \"input\": \"caf\xe9\"}",
		`{"id": "a", "input": "x", "metadata": {"k": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`,
		"\x7fELF\x02\x01\x01\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "cases.jsonl", data) })
}

func FuzzReadJSON(f *testing.F) {
	for _, s := range []string{
		`[{"id": "a", "input": "x", "expect": {"maxToolCalls": 3}}, {"id": "b", "input": "y", "clientOptions": {"timeout": "5s"}}]`,
		`[{"id": "a", "input": "x"},]`,
		`[{"id": "a", "input": "x"} {"id": "b", "input": "y"}]`,
		`{"id": "a", "input": "x"}`,
		`[` + strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200) + `]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "cases.json", data) })
}

func FuzzReadYAML(f *testing.F) {
	laughs := "- id: a\n  input: x\n  metadata:\n    x0: &x0 [lol]\n"
	for i := 1; i <= 9; i++ {
		laughs += "    x" + string(rune('0'+i)) + ": &x" + string(rune('0'+i)) + " [" + strings.Repeat("*x"+string(rune('0'+i-1))+", ", 8) + "*x" + string(rune('0'+i-1)) + "]\n"
	}
	for _, s := range []string{
		"- id: a\n  input: |\n    line\n  expect:\n    - answerContains: b\n- id: 2\n  input: y\n",
		"[{id: a, input: \"x\\udc00\"}]",
		"- id: a\n\tinput: x\n",
		laughs,
		"- id: a\n  input: x\n  metadata: {k: " + strings.Repeat("[", 300) + strings.Repeat("]", 300) + "}\n",
		"- &c {id: a, input: x}\n- *c\n",
		"- id: a\n  input: !!binary /w==\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "cases.yaml", data) })
}

func FuzzReadCSV(f *testing.F) {
	for _, s := range []string{
		"id,input,expect.answerContains,expect.maxToolCalls,metadata.tag\na,\"x\ny\",b,3,t\n",
		"id,input\na,\"open\n",
		"id,input\na,caf\xe9\n",
		"\ufeffinput,id\r\nx,a\r\n",
		"id,id,input\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "cases.csv", data) })
}
