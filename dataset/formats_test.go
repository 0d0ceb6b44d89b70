package dataset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/dataset/datasettest"
)

// formatsDir is testdata/formats, absolute (SourceParams.Dir always is).
func formatsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "formats"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// pathOptions are a format's options naming file.
func pathOptions(file string) json.RawMessage {
	data, _ := json.Marshal(map[string]string{"path": file})
	return data
}

// formatFiles are the valid files of testdata/formats by format, each
// with the same three cases.
var formatFiles = map[string][]string{
	"jsonl": {"cases.jsonl"},
	"json":  {"cases.json"},
	"yaml":  {"cases.yaml", "cases.yml"},
	"csv":   {"cases.csv"},
}

// wrongFormat is, for each format, a valid file of another format: a
// definition reads only the files its extensions name.
var wrongFormat = map[string]string{
	"jsonl": "cases.json",
	"json":  "cases.jsonl",
	"yaml":  "cases.csv",
	"csv":   "cases.yaml",
}

// badOptions are the options every format's Load must refuse, for files
// named with ext: broken, empty, missing or no file, and options that
// break the schema.
func badOptions(name, ext string) []json.RawMessage {
	bad := []json.RawMessage{
		pathOptions("bad" + ext),
		pathOptions("empty" + ext),
		pathOptions("missing" + ext),
		pathOptions(wrongFormat[name]),
		pathOptions("cases.txt"),
		pathOptions("."),
		pathOptions(""),
		pathOptions("   "),
		json.RawMessage(`{}`),
		json.RawMessage(`null`),
		json.RawMessage(`[]`),
		json.RawMessage(`"cases` + ext + `"`),
		json.RawMessage(`{"path": 5}`),
		json.RawMessage(`{"file": "cases` + ext + `"}`),
		json.RawMessage(`{"path": "cases` + ext + `", "table": "smoke"}`),
		json.RawMessage(`{"path": "cases` + ext + `"} {}`),
		json.RawMessage(`not json`),
	}
	return bad
}

// TestFormatsConform runs the dataset source suite on each of MST's file
// formats, as on a plugin's source, with the valid files of
// testdata/formats and the bad options above.
func TestFormatsConform(t *testing.T) {
	t.Parallel()
	dir := formatsDir(t)
	tested := 0
	for _, def := range dataset.Formats() {
		files, ok := formatFiles[def.Name]
		if !ok {
			t.Errorf("format %s has no files here", def.Name)
			continue
		}
		tested++
		for _, file := range files {
			t.Run(file, func(t *testing.T) {
				t.Parallel()
				if len(def.Options) == 0 || def.Description == "" {
					t.Errorf("%s has no options schema or no description", def.Name)
				}
				datasettest.Run(t, def, datasettest.Fixture{
					Options: pathOptions(file),
					Dir:     dir,
					IDs:     []string{"oslo", "tokyo", "7"},
					Bad:     badOptions(def.Name, filepath.Ext(file)),
				})
			})
		}
	}
	if tested != len(formatFiles) {
		t.Errorf("tested %d formats, want %d", tested, len(formatFiles))
	}
}

// TestFormatsReadAsLoad: a format's Load gives, for every file of
// testdata/formats, the cases and the errors, at their file and line,
// that dataset.Load gives for the file.
func TestFormatsReadAsLoad(t *testing.T) {
	t.Parallel()
	dir := formatsDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]*dataset.SourceDefinition{}
	for _, def := range dataset.Formats() {
		defs[def.Name] = def
	}
	byExt := map[string]string{".jsonl": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}
	for _, e := range entries {
		file := e.Name()
		def := defs[byExt[filepath.Ext(file)]]
		if def == nil {
			t.Errorf("testdata/formats/%s names no format", file)
			continue
		}
		path := filepath.Join(dir, file)
		wantCases, wantErr := dataset.Load(path)
		for _, opts := range []dataset.SourceParams{
			{Options: pathOptions(file), Dir: dir},
			{Options: pathOptions(path), Dir: "/elsewhere"},
			{Options: pathOptions(path)},
		} {
			got, err := def.Load(t.Context(), opts)
			if diff := cmp.Diff(wantCases, got); diff != "" {
				t.Errorf("%s.Load(%s, Dir %q) cases differ from Load(%s) (-Load +definition):\n%s", def.Name, opts.Options, opts.Dir, file, diff)
			}
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("%s.Load(%s, Dir %q) =\n%v\nwant Load(%s)'s\n%v", def.Name, opts.Options, opts.Dir, err, file, wantErr)
			}
			var es dataset.Errors
			if err != nil && !errors.As(err, &es) {
				t.Errorf("%s.Load(%s) error is %T, want dataset.Errors", def.Name, opts.Options, err)
			}
		}
		if strings.HasPrefix(file, "cases.") && wantErr != nil {
			t.Errorf("Load(%s) = %v, want its cases", file, wantErr)
		}
		if strings.HasPrefix(file, "bad.") && (wantErr == nil || !strings.HasPrefix(wantErr.Error(), path+":1: ") && !strings.HasPrefix(wantErr.Error(), path+":2: ")) {
			t.Errorf("Load(%s) = %v, want errors at their file and line", file, wantErr)
		}
	}
}

// TestFormatsSameCases: the valid files of every format give the same
// cases, but for their Source.
func TestFormatsSameCases(t *testing.T) {
	t.Parallel()
	dir := formatsDir(t)
	var first []dataset.Case
	for _, def := range dataset.Formats() {
		for _, file := range formatFiles[def.Name] {
			cases, err := def.Load(t.Context(), dataset.SourceParams{Options: pathOptions(file), Dir: dir})
			if err != nil {
				t.Fatalf("%s.Load(%s) failed:\n%v", def.Name, file, err)
			}
			for i := range cases {
				if want := fmt.Sprintf("%s:", filepath.Join(dir, file)); !strings.HasPrefix(cases[i].Source, want) {
					t.Errorf("%s: case %s has the Source %q, want %q and its line", file, cases[i].ID, cases[i].Source, want)
				}
				cases[i].Source = ""
			}
			if first == nil {
				first = cases
				continue
			}
			if diff := cmp.Diff(first, cases, cmp.Transformer("raw", func(r json.RawMessage) string { return string(r) })); diff != "" {
				t.Errorf("%s gives other cases than cases.jsonl (-jsonl +%s):\n%s", file, file, diff)
			}
		}
	}
}

// TestFormatsOptions: options a format cannot read are told in MST's
// words, each problem once.
func TestFormatsOptions(t *testing.T) {
	t.Parallel()
	var csv *dataset.SourceDefinition
	for _, def := range dataset.Formats() {
		if def.Name == "csv" {
			csv = def
		}
	}
	tests := []struct{ options, want string }{
		{`{}`, `missing option "path": give the case file, such as {"path": "cases.csv"}`},
		{``, `missing option "path": give the case file, such as {"path": "cases.csv"}`},
		{`{"path": " "}`, `option "path" is blank: give the case file, such as {"path": "cases.csv"}`},
		{`{"path": 5}`, `option "path" must be the case file's path, a string, got number 5`},
		{`{"paht": "cases.csv", "table": 1}`, "unknown option \"paht\" (did you mean path?): the one option is path, the case file\n" +
			"unknown option \"table\": the one option is path, the case file\n" +
			`missing option "path": give the case file, such as {"path": "cases.csv"}`},
		{`["cases.csv"]`, `the options must be an object such as {"path": "cases.csv"}, got a list`},
		{`{"path": "cases.csv"`, `the options are not JSON (unexpected end (a bracket or quote is not closed)): give {"path": "cases.csv"}`},
		{`{"path": "cases.csv"} {}`, `the options are not JSON (more than one JSON value): give {"path": "cases.csv"}`},
		{`{"path": "cases.yaml"}`, filepath.Join(formatsDir(t), "cases.yaml") + `: the csv format reads .csv files; this file's name ends in .yaml`},
		{`{"path": "cases"}`, filepath.Join(formatsDir(t), "cases") + `: the csv format reads .csv files; this file's name has no extension`},
	}
	for _, tt := range tests {
		_, err := csv.Load(context.Background(), dataset.SourceParams{Options: json.RawMessage(tt.options), Dir: formatsDir(t)})
		if err == nil || err.Error() != tt.want {
			t.Errorf("csv.Load(%s) = %v, want\n%s", tt.options, err, tt.want)
		}
	}
}

// TestFormatsList: one definition per format, new on each call; none is
// a dataset source an eval config can name.
func TestFormatsList(t *testing.T) {
	t.Parallel()
	var names []string
	for _, def := range dataset.Formats() {
		names = append(names, def.Name)
		if def.Load == nil || def.LoadJSON != nil || len(def.Credentials) > 0 {
			t.Errorf("%s: want Load only, and no credentials", def.Name)
		}
		def.Name = "changed"
		def.Options[0] = 'x'
	}
	if want := []string{"jsonl", "json", "yaml", "csv"}; !cmp.Equal(names, want) {
		t.Errorf("Formats() = %q, want %q", names, want)
	}
	again := dataset.Formats()
	if again[0].Name != "jsonl" || again[0].Options[0] != '{' {
		t.Errorf("Formats() gave definitions changed through an earlier call's")
	}
	if _, err := dataset.NewSources().Lookup("jsonl"); err == nil {
		t.Errorf("an empty Sources knows jsonl; the formats must not be dataset sources a config can name")
	}
}

// TestLoadSpecsPaths: datasets given by path, in several formats, are
// read by their formats, with the checks across them: a duplicate id is
// told at its file and line, naming the first.
func TestLoadSpecsPaths(t *testing.T) {
	t.Parallel()
	dir := formatsDir(t)
	specs := []dataset.Spec{
		{Path: filepath.Join(dir, "cases.jsonl"), Dir: dir},
		{Path: filepath.Join(dir, "bad.jsonl"), Dir: dir},
		{Path: filepath.Join(dir, "cases.yml"), Dir: dir},
	}
	_, err := dataset.LoadSpecs(t.Context(), specs, nil, nil)
	at := func(file string, line int) string { return fmt.Sprintf("%s:%d", filepath.Join(dir, file), line) }
	want := strings.Join([]string{
		at("bad.jsonl", 1) + `: case "oslo": duplicate id (first at ` + at("cases.jsonl", 1) + ")",
		at("bad.jsonl", 2) + ": invalid JSON: unexpected end (a bracket or quote is not closed) (column 33)",
		at("bad.jsonl", 3) + `: case "bergen": input is blank`,
		at("bad.jsonl", 4) + `: case "oslo": unknown key "inptu" (did you mean input?)`,
		at("bad.jsonl", 4) + `: case "oslo": duplicate id (first at ` + at("cases.jsonl", 1) + ")",
		at("cases.yml", 2) + `: case "oslo": duplicate id (first at ` + at("cases.jsonl", 1) + ")",
		at("cases.yml", 3) + `: case "tokyo": duplicate id (first at ` + at("cases.jsonl", 3) + ")",
		at("cases.yml", 4) + `: case "7": duplicate id (first at ` + at("cases.jsonl", 4) + ")",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("LoadSpecs(cases.jsonl, bad.jsonl, cases.yml) =\n%v\nwant\n%s", err, want)
	}

	loaded, err := dataset.LoadSpecs(t.Context(), specs[:1], nil, nil)
	if err != nil {
		t.Fatalf("LoadSpecs(cases.jsonl) failed:\n%v", err)
	}
	cases, err := dataset.Load(specs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]dataset.Loaded{{Origin: specs[0].Path, Cases: cases}}, loaded); d != "" {
		t.Errorf("LoadSpecs(cases.jsonl) differs from Load (-Load +LoadSpecs):\n%s", d)
	}
}
