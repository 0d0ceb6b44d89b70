package eval

import (
	"strings"
	"testing"
)

// fuzzLoad loads data as a config named file and checks what every input
// must give: a config, or MST's errors, each with its file and a message,
// none in encoding/json's words. The fuzzer finds the panics and the
// inputs that take long (its executions per second fall).
func fuzzLoad(t *testing.T, file string, data []byte) {
	l := &loader{file: file, cat: clientCatalog{}, dir: t.TempDir()}
	cfg := l.loadData(data)
	if len(l.errs) == 0 {
		if cfg == nil {
			t.Fatal("no config and no error")
		}
		return
	}
	for _, e := range l.errs {
		if e.File != file || strings.TrimSpace(e.Msg) == "" {
			t.Fatalf("error without its file or message: %#v", e)
		}
		if strings.Contains(e.Msg, "invalid character") || strings.Contains(e.Msg, "looking for beginning") {
			t.Fatalf("a parser's words reach the user: %s", e.Msg)
		}
	}
}

func seedConfigs(f *testing.F, ext string) {
	for _, s := range fuzzSeeds[ext] {
		f.Add([]byte(s))
	}
}

var fuzzSeeds = map[string][]string{
	".yaml": {
		"name: t\ndatasets: [cases.jsonl]\nservers:\n  w: {command: node, cwd: x, startupTimeout: 30s}\nvariants:\n  v: {model: offline, clientOptions: {timeout: 5s}}\n",
		laughs(9, 9),
		"name: " + nested("yaml flow", 300) + "\n",
		"name: " + nested("yaml block", 200) + "\n",
		"a: &a {k: 1}\nb: {<<: *a}\nc: *a\n",
		"name: \"\\udc00\"\n",
		"name: t\n\tservers: {}\n",
		"- a\n---\n- b\n",
		"name: !!binary aGVsbG8=\n",
		"? [a, b]\n: c\n",
	},
	".json": {
		`{"name": "t", "datasets": ["cases.jsonl"], "servers": {"w": {"command": "node"}}, "variants": {"v": {"model": "offline"}}}`,
		`{"name": "t",}`,
		`{"name": "t" "trials": 3}`,
		`{"name": "\ud800"}`,
		`{"name": ` + nested("json list", 300) + `}`,
		`{"a": 1, "a": 2}`,
		"{\"name\": \"caf\xe9\"}",
		`[1, 2, 3]`,
		`{"trials": 1e400}`,
	},
}

func FuzzLoadYAML(f *testing.F) {
	seedConfigs(f, ".yaml")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzLoad(t, "eval.yaml", data) })
}

func FuzzLoadJSON(f *testing.F) {
	seedConfigs(f, ".json")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzLoad(t, "eval.json", data) })
}
