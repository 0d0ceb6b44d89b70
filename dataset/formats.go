package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// format is one of MST's case file formats: the reader of its files and
// the extensions that name it. Formats gives each as a SourceDefinition;
// a dataset given by its path (Load, LoadAll, LoadSpecs) is read by the
// format its extension names, through the same reader.
type format struct {
	name        string
	exts        []string
	description string
	parse       func(r *reader, data []byte)
}

// formats are MST's case file formats, in the order the message for an
// unsupported extension lists them.
var formats = []*format{
	{name: "jsonl", exts: []string{".jsonl"}, parse: (*reader).readJSONL,
		description: "Cases from a JSONL file: one case object per line; blank lines are skipped."},
	{name: "json", exts: []string{".json"}, parse: (*reader).readJSON,
		description: "Cases from a JSON file: a list of case objects."},
	{name: "yaml", exts: []string{".yaml", ".yml"}, parse: (*reader).readYAML,
		description: "Cases from a YAML file (.yaml or .yml): one document, a list of case objects."},
	{name: "csv", exts: []string{".csv"}, parse: (*reader).readCSV,
		description: "Cases from a CSV file: a header row naming the columns id, input, model, expect.<grader> and metadata.<key>, then one case per record."},
}

// formatOf returns the format the extension of path names (in any case),
// or nil for none of MST's.
func formatOf(path string) *format {
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range formats {
		if slices.Contains(f.exts, ext) {
			return f
		}
	}
	return nil
}

// unsupported words a file name whose extension names no format.
func unsupported(path string) string {
	var exts []string
	for _, f := range formats {
		exts = append(exts, f.exts...)
	}
	list := strings.Join(exts[:len(exts)-1], ", ") + " or " + exts[len(exts)-1]
	return fmt.Sprintf("unsupported dataset format %q: use %s", strings.ToLower(filepath.Ext(path)), list)
}

// fileOptions is the Options schema of every format's definition.
const fileOptions = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["path"],
  "properties": {
    "path": {
      "type": "string",
      "minLength": 1,
      "description": "The case file: absolute, or relative to the eval config's folder (SourceParams.Dir)."
    }
  }
}`

// Formats returns MST's case file formats as dataset source definitions,
// one per format: jsonl, json, yaml (for .yaml and .yml files) and csv.
// Their Options are {"path": FILE}, FILE relative to SourceParams.Dir
// when relative. Load reads a file its format's extensions name (in any
// case), and returns its cases, or an Errors with every problem at its
// file and line, exactly as Load(FILE) would; a file named otherwise is
// refused.
//
// These are the readers Load, LoadAll and LoadSpecs use for a dataset
// given by its path, chosen by the file's extension, so the dataset
// source suite (dataset/datasettest) checks them as it checks a plugin's
// source. An eval config names a case file by its path, never by these
// names: they are in no Sources. Each call returns new definitions.
func Formats() []*SourceDefinition {
	out := make([]*SourceDefinition, len(formats))
	for i, f := range formats {
		out[i] = &SourceDefinition{
			Name:        f.name,
			Description: f.description,
			Options:     json.RawMessage(fileOptions),
			Load:        f.load,
		}
	}
	return out
}

// load is the Load of f's definition.
func (f *format) load(_ context.Context, p SourceParams) ([]Case, error) {
	path, err := f.path(p)
	if err != nil {
		return nil, err
	}
	if formatOf(path) != f {
		return nil, Errors{{File: path, Msg: f.misnamed(path)}}
	}
	r := readFile(path, f)
	if err := checkAcross([]*reader{r}); err != nil {
		return nil, err
	}
	return r.cases, nil
}

// misnamed words a file f's definition was given whose extension is none
// of f's: each format reads only the files its extensions name, as when
// a config gives the file, so that what its messages say of the file's
// name ("a .json dataset must be a list", "name the file .jsonl") holds.
func (f *format) misnamed(path string) string {
	got := "has no extension"
	if ext := filepath.Ext(path); ext != "" {
		got = "ends in " + ext
	}
	return fmt.Sprintf("the %s format reads %s files; this file's name %s", f.name, strings.Join(f.exts, " or "), got)
}

// path reads the options of f's definition: the file, joined to p.Dir
// when relative. Its problems come as an Errors without a file.
func (f *format) path(p SourceParams) (string, error) {
	example := fmt.Sprintf(`{"path": "cases%s"}`, f.exts[0])
	opts := bytes.TrimSpace(p.Options)
	if len(opts) == 0 {
		opts = []byte(`{}`)
	}
	dec := newDecoder(opts)
	v, err := dec.value()
	if err == nil {
		if _, extra := dec.dec.Token(); extra != io.EOF {
			err = errors.New("more than one JSON value")
		}
	}
	if err != nil {
		msg, _ := dec.explain(err)
		return "", Errors{{Msg: fmt.Sprintf("the options are not JSON (%s): give %s", msg, example)}}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", Errors{{Msg: fmt.Sprintf("the options must be an object such as %s, got %s", example, describe(v))}}
	}
	var errs Errors
	var unknown []string
	for k := range obj {
		if k != "path" {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		errs = append(errs, Error{Msg: fmt.Sprintf("unknown option %q%s: the one option is path, the case file", k, didYouMean(k, []string{"path"}))})
	}
	pv, has := obj["path"]
	path, isString := pv.(string)
	switch {
	case !has:
		errs = append(errs, Error{Msg: fmt.Sprintf("missing option \"path\": give the case file, such as %s", example)})
	case !isString:
		errs = append(errs, Error{Msg: fmt.Sprintf("option \"path\" must be the case file's path, a string, got %s", describe(pv))})
	case strings.TrimSpace(path) == "":
		errs = append(errs, Error{Msg: fmt.Sprintf("option \"path\" is blank: give the case file, such as %s", example)})
	}
	if len(errs) > 0 {
		return "", errs
	}
	if p.Dir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(p.Dir, path)
	}
	return path, nil
}
