package datasettest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mst-eval/mst/dataset"
)

// Fixture is what the suite loads.
type Fixture struct {
	// Options are options that load (the entry's options in a config).
	Options json.RawMessage
	// Dir is SourceParams.Dir: the folder relative paths in Options are
	// relative to. It must be absolute.
	Dir string
	// IDs are the ids of the cases Options give, in order.
	IDs []string
	// Env holds the credentials the suite's SourceParams.Env gives, by
	// name; every name must be in the definition's Credentials.
	Env map[string]string
	// Bad are options Load must reject with an error (a missing file, a
	// missing table). MST checks options against the schema when a
	// config loads, but Load must not rely on it: these may break the
	// schema too.
	Bad []json.RawMessage
}

// CancelWithin bounds how long the suite waits for Load to return when its
// context is already cancelled, when the test's deadline is further.
const CancelWithin = time.Minute

// Run checks def against the dataset source contract with f, reporting
// each problem as an error of t.
func Run(t *testing.T, def *dataset.SourceDefinition, f Fixture) {
	t.Helper()
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		// Leave the test a moment to report before it times out.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Until(d)/10))
		defer cancel()
	}
	for _, err := range Problems(Check(ctx, def, f)) {
		t.Error(err)
	}
}

// Problems splits an error that Check returned into its problems.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Check is Run without a test: it returns every problem found, joined
// (errors.Join), or nil. The wait for a Load with a cancelled context
// ends at ctx's deadline, or after CancelWithin, whichever is first.
func Check(ctx context.Context, def *dataset.SourceDefinition, f Fixture) error {
	if def == nil {
		return errors.New("the dataset.SourceDefinition is nil")
	}
	c := &checker{def: def, name: def.Name, f: f}
	if c.name == "" {
		return errors.New("the dataset source has no Name")
	}
	if (def.Load == nil) == (def.LoadJSON == nil) {
		return fmt.Errorf("%s: a dataset.SourceDefinition must have one of Load and LoadJSON", c.name)
	}
	if !filepath.IsAbs(f.Dir) {
		return fmt.Errorf("%s: Fixture.Dir %q is not absolute (SourceParams.Dir always is)", c.name, f.Dir)
	}
	if len(f.IDs) == 0 {
		return fmt.Errorf("%s: Fixture.IDs is empty; give the ids Fixture.Options load", c.name)
	}
	if len(bytes.TrimSpace(f.Options)) == 0 {
		c.f.Options = json.RawMessage(`{}`)
	}
	c.checkSchema()
	first, ok := c.load(ctx, "Load", c.f.Options)
	if ok {
		if ids := idsOf(first); !slices.Equal(ids, f.IDs) {
			c.fail("Load(%s) gave the ids %q, want %q in this order", c.f.Options, ids, f.IDs)
		}
		c.checkMST(ctx, first)
		if again, ok := c.load(ctx, "a second Load", c.f.Options); ok {
			if d := cmp.Diff(normalize(first), normalize(again)); d != "" {
				c.fail("loading twice gave different cases (-first +second):\n%s", d)
			}
		}
	}
	for _, bad := range f.Bad {
		cases, err := c.call(ctx, bad)
		switch {
		case err == nil:
			c.fail("Load(%s) gave %d cases and no error; want an error saying what is wrong with the options", bad, len(cases))
		case strings.TrimSpace(err.Error()) == "":
			c.fail("Load(%s) returned an empty error; say which option is wrong and what to do", bad)
		}
	}
	c.checkCancelled(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.problems...)
}

type checker struct {
	def      *dataset.SourceDefinition
	name     string
	f        Fixture
	mu       sync.Mutex
	problems []error
}

func (c *checker) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, fmt.Errorf(c.name+": "+format, args...))
}

// env is the suite's SourceParams.Env: it gives the fixture's values and
// reports a name the definition does not declare.
func (c *checker) env(name string) (string, bool) {
	if !slices.Contains(c.def.Credentials, name) {
		c.fail("Load asked Env for %q, which is not in Credentials %q; declare every credential the source reads", name, c.def.Credentials)
		return "", false
	}
	v, ok := c.f.Env[name]
	return v, ok
}

// call calls Load (or LoadJSON, whose objects it decodes as cases) with
// options, turning a panic into an error.
func (c *checker) call(ctx context.Context, options json.RawMessage) (cases []dataset.Case, err error) {
	defer func() {
		if v := recover(); v != nil {
			//lint:ignore ST1005 Load is the method's name
			cases, err = nil, fmt.Errorf("Load panicked: %v", v)
		}
	}()
	p := dataset.SourceParams{Options: options, Dir: c.f.Dir, Env: c.env}
	if c.def.Load != nil {
		return c.def.Load(ctx, p)
	}
	raw, err := c.def.LoadJSON(ctx, p)
	if err != nil {
		return nil, err
	}
	cases = make([]dataset.Case, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &cases[i]); err != nil {
			// MST's own check (checkMST) says more; the ids are
			// compared without this case.
			cases[i] = dataset.Case{ID: fmt.Sprintf("(case %d is not a case object: %v)", i+1, err)}
		}
	}
	return cases, nil
}

// load calls Load and reports an error as a problem.
func (c *checker) load(ctx context.Context, what string, options json.RawMessage) ([]dataset.Case, bool) {
	cases, err := c.call(ctx, options)
	if err != nil {
		c.fail("%s(%s) in %s = %v; want the fixture's cases", what, options, c.f.Dir, err)
		return nil, false
	}
	return cases, true
}

// checkSchema checks the Options schema and that it accepts the fixture's
// options.
func (c *checker) checkSchema() {
	raw := bytes.TrimSpace(c.def.Options)
	if len(raw) == 0 {
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		c.fail("Options is not JSON: %v; it must be the JSON Schema of the source's options", err)
		return
	}
	if _, ok := doc.(map[string]any); !ok {
		c.fail("Options is %.40s, not a JSON object; it must be a JSON Schema object such as {\"type\": \"object\", …}", raw)
		return
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("options.json", doc); err != nil {
		c.fail("Options schema: %v", err)
		return
	}
	s, err := comp.Compile("options.json")
	if err != nil {
		c.fail("Options is not a valid JSON Schema: %v", err)
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.f.Options))
	if err != nil {
		c.fail("Fixture.Options is not JSON: %v", err)
		return
	}
	if err := s.Validate(v); err != nil {
		c.fail("the fixture's options %s do not pass the source's own Options schema: %v", c.f.Options, err)
	}
}

// checkMST loads the fixture through dataset.LoadSpecs, as mst run does,
// and compares its cases with Load's.
func (c *checker) checkMST(ctx context.Context, direct []dataset.Case) {
	loaded, err := dataset.LoadSpecs(ctx, []dataset.Spec{{Source: c.name, Options: c.f.Options, Dir: c.f.Dir}}, dataset.NewSources(c.def), c.env)
	if err != nil {
		c.fail("MST rejects the cases Load gives:\n%v", err)
		return
	}
	if len(loaded) != 1 {
		c.fail("dataset.LoadSpecs gave %d datasets, want 1", len(loaded))
		return
	}
	if d := cmp.Diff(normalize(direct), normalize(loaded[0].Cases)); d != "" {
		c.fail("the cases as MST reads them differ from Load's (-Load +MST); give values as a JSON dataset line would:\n%s", d)
	}
}

// checkCancelled calls Load with a cancelled context and waits for it to
// return, up to ctx's deadline or CancelWithin.
func (c *checker) checkCancelled(ctx context.Context) {
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.call(cancelled, c.f.Options)
		done <- err
	}()
	wait := time.NewTimer(CancelWithin)
	defer wait.Stop()
	select {
	case <-done:
		// An error, or the cases of a source that had nothing to wait
		// for: both are fine.
	case <-ctx.Done():
		c.fail("Load with a cancelled context had not returned when the test's deadline came; stop when ctx ends")
	case <-wait.C:
		c.fail("Load with a cancelled context had not returned after %v; stop when ctx ends", CancelWithin)
	}
}

func idsOf(cases []dataset.Case) []string {
	ids := make([]string, len(cases))
	for i, k := range cases {
		ids[i] = k.ID
	}
	return ids
}

// normalize turns cases into JSON values without their Source, so that
// cases a source built (float64 metadata) compare equal to the same cases
// read back (json.Number).
func normalize(cases []dataset.Case) []any {
	out := make([]any, len(cases))
	for i, k := range cases {
		k.Source = ""
		data, err := json.Marshal(k)
		if err != nil {
			out[i] = fmt.Sprintf("cannot encode: %v", err)
			continue
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			out[i] = fmt.Sprintf("cannot decode: %v", err)
			continue
		}
		out[i] = v
	}
	return out
}
