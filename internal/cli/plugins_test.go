package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/plugin"
	"github.com/mst-eval/mst/transcript"
)

type passAll struct{}

func (passAll) Name() string                              { return "" }
func (passAll) Grade(*transcript.Transcript) grade.Result { return grade.Result{Passed: true} }

// TestPluginsCommand: mst plugins lists compiled-in plugins with their
// kinds' full names, lists a broken program plugin with its problem and
// exits 1, and says where plugins come from when there are none.
func TestPluginsCommand(t *testing.T) {
	t.Parallel()
	acme := plugin.Plugin{Namespace: "acme", Version: "1.4.0", Module: "example.com/acme/mst-plugin",
		Graders: []*grade.Definition{{Name: "len", New: func(json.RawMessage) (grade.Grader, error) { return passAll{}, nil }}}}
	run := func(env []string, plugins []plugin.Plugin, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := cli.MainWith(t.Context(), args, cli.Stdio{Out: &out, Err: &errb, Env: env}, plugins)
		return out.String(), errb.String(), code
	}

	out, _, code := run(nil, nil, "plugins")
	if code != 0 || !strings.Contains(out, "No plugins") || !strings.Contains(out, "MST_PLUGIN_PATH, which is not set") {
		t.Errorf("mst plugins with none: exit %d, printed %q", code, out)
	}

	out, _, code = run(nil, []plugin.Plugin{acme}, "plugins", "--json")
	var list struct {
		Kind    string `json:"kind"`
		Plugins []struct {
			Namespace, Version, Origin, Module string
			Kinds                              map[string][]string
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 {
		t.Fatalf("mst plugins --json: exit %d, %v\n%s", code, err, out)
	}
	if list.Kind != "mst.plugins" || len(list.Plugins) != 1 || list.Plugins[0].Version != "1.4.0" ||
		list.Plugins[0].Origin != "compiled in" || list.Plugins[0].Kinds["grader"][0] != "acme/grader/len" {
		t.Errorf("mst plugins --json = %+v", list)
	}

	// A program that says it is another namespace, beside the same Go
	// plugin: both problems are shown, and the command fails.
	dir := t.TempDir()
	script := "#!/bin/sh\nread line\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocol\":\"mst.plugin/v1\",\"namespace\":\"other\",\"version\":\"1\"}}'\nread line\n"
	for _, name := range []string{"mst-plugin-liar", "mst-plugin-acme"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := run([]string{"MST_PLUGIN_PATH=" + dir}, []plugin.Plugin{acme}, "plugins")
	for _, want := range []string{"acme 1.4.0  (compiled in)", "grader            acme/grader/len",
		`says its namespace is "other"`, "namespace \"acme\" is taken by a plugin compiled into this mst"} {
		if !strings.Contains(out, want) {
			t.Errorf("mst plugins printed:\n%s\nwant it to hold %q", out, want)
		}
	}
	if code != 1 || !strings.Contains(errOut, "2 plugin(s) cannot be used") {
		t.Errorf("mst plugins with two broken plugins: exit %d, stderr %q; want 1", code, errOut)
	}
}

// TestValidateDatasetSource: a dataset source's options are checked
// against its schema, its cases go through the checks of a file's, ids
// are unique across sources and files, and the source gets only the
// credentials it declares.
func TestValidateDatasetSource(t *testing.T) {
	t.Parallel()
	var asked []string
	src := &dataset.SourceDefinition{
		Name:        "rows",
		Options:     json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"bad":{"type":"boolean"}}}`),
		Credentials: []string{"ROWS_KEY"},
		Load: func(ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			for _, k := range []string{"ROWS_KEY", "HOME", "OTHER_SECRET"} {
				if _, ok := p.Env(k); ok {
					asked = append(asked, k)
				}
			}
			var o struct{ Bad bool }
			json.Unmarshal(p.Options, &o)
			if o.Bad {
				return []dataset.Case{{ID: "ok", Input: "fine"}, {ID: "blank", Input: "  "}, {ID: "dup", Input: "again"}}, nil
			}
			return []dataset.Case{{ID: "ok-2", Input: "Bonjour à tous, 東京"}}, nil
		},
	}
	acme := plugin.Plugin{Namespace: "acme", Version: "1.0.0", DatasetSources: []*dataset.SourceDefinition{src}}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "c.jsonl"), []byte(`{"id":"dup","input":"hi"}`+"\n"), 0o644)
	write := func(datasets string) string {
		f := filepath.Join(dir, "eval.yaml")
		os.WriteFile(f, []byte("name: x\ndatasets:\n"+datasets+"servers: {w: {command: node}}\nvariants: {v: {model: offline}}\n"), 0o644)
		return f
	}
	validate := func(f string) (string, int) {
		var out, errb bytes.Buffer
		env := []string{"ROWS_KEY=k-canary", "OTHER_SECRET=s-canary", "HOME=/nowhere"}
		code := cli.MainWith(t.Context(), []string{"validate", f}, cli.Stdio{Out: &out, Err: &errb, Env: env}, []plugin.Plugin{acme})
		return out.String() + errb.String(), code
	}

	if msg, code := validate(write("  - c.jsonl\n  - {source: acme/dataset/rows, options: {tabel: x}}\n")); code != 2 || !strings.Contains(msg, "datasets[1].options: tabel: unknown option") {
		t.Errorf("validate with a misspelt option: exit %d\n%s", code, msg)
	}
	msg, code := validate(write("  - c.jsonl\n  - {source: acme/dataset/rows, options: {bad: true}}\n"))
	for _, want := range []string{`acme/dataset/rows {"bad":true}:2: case "blank": input is blank`, `case "dup": duplicate id (first at`} {
		if code != 2 || !strings.Contains(msg, want) {
			t.Errorf("validate with bad cases: exit %d\n%s\nwant %q", code, msg, want)
		}
	}
	if msg, code := validate(write("  - c.jsonl\n  - {source: acme/dataset/rows}\n")); code != 0 {
		t.Errorf("validate with good cases: exit %d\n%s", code, msg)
	}
	if !slices.Contains(asked, "ROWS_KEY") {
		t.Error("the source never got ROWS_KEY, which it declares and the environment sets")
	}
	for _, k := range asked {
		if k != "ROWS_KEY" {
			t.Errorf("the source could read %s, which it does not declare", k)
		}
	}
	if msg, code := validate(write("  - {source: acme/dataset/nope}\n")); code != 2 || !strings.Contains(msg, `unknown dataset source "acme/dataset/nope" (known: acme/dataset/rows)`) {
		t.Errorf("validate with an unknown source: exit %d\n%s", code, msg)
	}
}

// TestGradeWithPluginGraders: mst grade --graders reads a plugin's grader
// from the file, with the graders of this mst (built in and its
// plugins'); an mst without that plugin refuses the file, naming it.
func TestGradeWithPluginGraders(t *testing.T) {
	r := makeReportRuns(t)
	graders := filepath.Join(r.dir, "plugin-graders.yaml")
	if err := os.WriteFile(graders, []byte("- acme/grader/always: {}\n- toolCalled: echo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	acme := plugin.Plugin{Namespace: "acme", Version: "1.0.0",
		Graders: []*grade.Definition{{Name: "always", New: func(json.RawMessage) (grade.Grader, error) { return passAll{}, nil }}}}
	var out, errb bytes.Buffer
	code := cli.MainWith(t.Context(), []string{"grade", r.changed, "--graders", graders, "--json"}, cli.Stdio{Out: &out, Err: &errb, Env: os.Environ()}, []plugin.Plugin{acme})
	if code != 0 {
		t.Fatalf("mst grade --graders with a plugin's grader: exit %d\n%s", code, errb.String())
	}
	// The new grade set's grades (gradesets/N.jsonl) carry the plugin
	// grader's results.
	found := false
	filepath.WalkDir(r.changed, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == "gradesets" && strings.HasSuffix(d.Name(), ".jsonl") {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), `"grader":"acme/grader/always"`) {
				found = true
			}
		}
		return nil
	})
	if !found {
		t.Errorf("no stored grade holds a result of acme/grader/always under %s", r.changed)
	}
	code, _, stderr := mst(t, nil, "grade", r.changed, "--graders", graders)
	if code != 2 || !strings.Contains(stderr, `unknown grader "acme/grader/always"`) {
		t.Errorf("mst grade --graders without the plugin: exit %d, %s; want 2 naming the grader", code, stderr)
	}
}
