package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/ground/registry"
)

// SourceDefinition describes a dataset source a plugin adds: cases read
// from somewhere other than a file of MST's formats (a database, an HTTP
// endpoint, a spreadsheet service). An eval config names it in its
// datasets list:
//
//	datasets:
//	  - source: acme/dataset/sqlite
//	    options: {file: cases.db, table: smoke}
//
// Lifecycle: Load is called once per run, on the machine where the run is
// launched (mst run, mst validate, mst run --detach before it ships the
// run). The cases it returns are checked like a file's (ids present and
// unique, input not blank, known keys only) and travel with the run, so a
// worker, a grade worker and a detached coordinator never load a source
// and never see its credentials.
//
// MST's own file formats are definitions too (Formats): a case file given
// by its path is read by the one its extension names.
type SourceDefinition struct {
	// Name is the source's full name (NAMESPACE/dataset/NAME) once
	// registered; a plugin gives the short NAME.
	Name        string
	Description string
	// Options is the JSON Schema of the entry's options, checked when the
	// config loads.
	Options json.RawMessage
	// Credentials names the environment variables the source reads its
	// credentials from. Load sees them through SourceParams.Env, filled
	// from the secrets file or MST's environment; they go nowhere else.
	Credentials []string
	// Load returns the cases, in order. An error says what is wrong in the
	// user's words (which option, which table, what to do).
	Load func(ctx context.Context, p SourceParams) ([]Case, error)
	// LoadJSON, set in place of Load, returns the cases as JSON objects,
	// each checked exactly as a line of a JSONL dataset (unknown keys
	// included): for a source that has its cases as JSON, such as a
	// program plugin.
	LoadJSON func(ctx context.Context, p SourceParams) ([]json.RawMessage, error)
}

// SourceParams is what a source loads with.
type SourceParams struct {
	// Options is the entry's options, as JSON, checked against the
	// source's schema.
	Options json.RawMessage
	// Dir is the eval config's folder, absolute: relative paths in the
	// options are relative to it.
	Dir string
	// Env returns the value of one of the source's Credentials.
	Env func(name string) (string, bool)
}

// Sources holds dataset source definitions by name (MST's one registry
// shape). A nil *Sources holds none.
type Sources = registry.Registry[*SourceDefinition]

// NewSources returns a registry of defs; a duplicate name, or a definition
// without exactly one of Load and LoadJSON, panics.
func NewSources(defs ...*SourceDefinition) *Sources {
	return newSources(defs)
}

// NewLazySources returns a registry filled, on first use, with what load
// returns: program plugins are started only when a source is looked up.
func NewLazySources(load func() []*SourceDefinition) *Sources {
	return newSources(nil, registry.Lazy(load))
}

func newSources(defs []*SourceDefinition, opts ...registry.Option[*SourceDefinition]) *Sources {
	opts = append(opts,
		registry.Check(func(d *SourceDefinition) error {
			if (d.Load == nil) == (d.LoadJSON == nil) {
				return errors.New("must have one of Load and LoadJSON")
			}
			return nil
		}),
		registry.Unknown[*SourceDefinition](func(name string, known []string) error {
			if len(known) == 0 {
				return fmt.Errorf("unknown dataset source %q: no installed plugin provides a dataset source (mst plugins lists what is installed)", name)
			}
			return fmt.Errorf("unknown dataset source %q (known: %s)", name, strings.Join(known, ", "))
		}))
	return registry.New("dataset source", func(d *SourceDefinition) string { return d.Name }, defs, opts...)
}

// Spec is one entry of an eval's datasets: a case file (Path), or a
// source's cases (Source and Options).
type Spec struct {
	Path    string
	Source  string
	Options json.RawMessage
	// Dir is the config's folder (SourceParams.Dir).
	Dir string
}

// Origin names the dataset in errors, in a run's loaded datasets and in
// each case's Source: the file's path, or the source's name and its
// options.
func (s Spec) Origin() string {
	if s.Source == "" {
		return s.Path
	}
	opts := strings.TrimSpace(string(s.Options))
	if opts == "" || opts == "null" {
		opts = "{}"
	}
	return s.Source + " " + opts
}

// LoadSpecs reads every dataset of specs, each as a Loaded, with the
// checks LoadAll makes across them (ids unique across all). A source's
// cases are checked as a file's would be; their Source reads
// "SOURCE OPTIONS:N" for the Nth case. env gives sources their
// credentials (nil: none).
func LoadSpecs(ctx context.Context, specs []Spec, sources *Sources, env func(string) (string, bool)) ([]Loaded, error) {
	if len(specs) == 0 {
		return nil, Errors{{Msg: "no datasets given"}}
	}
	var readers []*reader
	for _, sp := range specs {
		if sp.Source == "" {
			readers = append(readers, readPath(sp.Path))
			continue
		}
		r := &reader{file: sp.Origin()}
		r.readSource(ctx, sp, sources, env)
		readers = append(readers, r)
	}
	if err := checkAcross(readers); err != nil {
		return nil, err
	}
	out := make([]Loaded, len(readers))
	for i, r := range readers {
		out[i] = Loaded{Origin: specs[i].Origin(), Cases: r.cases}
	}
	return out, nil
}

// readSource asks a source for its cases and checks each as a case object.
func (r *reader) readSource(ctx context.Context, sp Spec, sources *Sources, env func(string) (string, bool)) {
	def, err := sources.Lookup(sp.Source)
	if err != nil {
		r.fail(0, "", err.Error())
		return
	}
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	allowed := func(name string) (string, bool) {
		if !slices.Contains(def.Credentials, name) {
			return "", false
		}
		return env(name)
	}
	opts := sp.Options
	if len(opts) == 0 {
		opts = json.RawMessage(`{}`)
	}
	cases, raw, err := safeLoad(ctx, def, SourceParams{Options: opts, Dir: sp.Dir, Env: allowed})
	if err == nil && def.LoadJSON != nil {
		// Case objects as the source wrote them: checked exactly as the
		// lines of a JSONL file, unknown keys included.
		for i, data := range raw {
			v, err := newDecoder(data).value()
			if err != nil {
				r.fail(i+1, "", "invalid JSON: "+err.Error())
				continue
			}
			r.addObject(v, i+1)
		}
		if len(raw) == 0 && len(r.errs) == 0 {
			r.fail(0, "", "the source gave no cases")
		}
		return
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			r.fail(0, "", "loading was interrupted")
			return
		}
		r.fail(0, "", strings.TrimRight(err.Error(), "\n"))
		return
	}
	r.addCases(cases)
	if len(cases) == 0 && len(r.errs) == 0 {
		r.fail(0, "", "the source gave no cases")
	}
}

// addCases checks cases made in Go, the Nth as line N: each goes through
// the same checks as a line of a JSONL file, since Go's types give no
// guarantee about the values (a blank id, a blank input).
func (r *reader) addCases(cases []Case) {
	for i, c := range cases {
		c.Source = ""
		// JSON would turn invalid UTF-8 into U+FFFD without a word; a
		// file with it is refused, and so are these.
		if !utf8.ValidString(c.ID) || !utf8.ValidString(c.Input) || !utf8.ValidString(c.Model) {
			r.fail(i+1, "", "the id, input or model is not valid UTF-8: a case is UTF-8 text")
			continue
		}
		data, err := json.Marshal(c)
		if err != nil {
			r.fail(i+1, c.ID, "cannot encode the case: "+err.Error())
			continue
		}
		v, err := newDecoder(data).value()
		if err != nil {
			r.fail(i+1, c.ID, "cannot read the case back: "+err.Error())
			continue
		}
		r.addObject(v, i+1)
	}
}

// Check holds cases made in Go (by a program that builds a plan rather
// than load a dataset) to what a dataset file and a source's cases are
// held to: an id and an input that are not blank, ids unique, known keys
// only. origin names them in the errors, the Nth case as origin:N. An
// empty list is an error too. The error is an Errors.
func Check(origin string, cases []Case) error {
	r := &reader{file: origin}
	r.addCases(cases)
	if len(cases) == 0 {
		r.fail(0, "", "holds no cases")
	}
	return checkAcross([]*reader{r})
}

// safeLoad calls def.Load, turning a panic into an error.
func safeLoad(ctx context.Context, def *SourceDefinition, p SourceParams) (cases []Case, raw []json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the dataset source %s panicked: %v", def.Name, v)
		}
	}()
	if def.LoadJSON != nil {
		raw, err = def.LoadJSON(ctx, p)
		return nil, raw, err
	}
	cases, err = def.Load(ctx, p)
	return cases, nil, err
}
