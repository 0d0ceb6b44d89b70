package grade

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mst-eval/mst/internal/ground/registry"
	"github.com/mst-eval/mst/transcript"
)

// Definition describes a grader kind that is not built in: one a plugin
// adds. In an eval config or a case's expect list it is written like a
// built-in grader, as an object with one key, its full name:
//
//	{"acme/grader/sql-result": {"column": "total", "equals": 42}}
//
// Lifecycle: New is called once per spec when the config (or a case) is
// read, on the coordinator and again on every grade worker; it must reject
// options it does not understand, saying which and why, and do no I/O
// beyond reading its options. The Grader it returns is then called for
// many transcripts, from several goroutines at once.
type Definition struct {
	// Name is the grader's full name (NAMESPACE/grader/NAME) once
	// registered; a plugin gives the short NAME and MST adds the rest.
	Name        string
	Description string
	// Options is the JSON Schema of the value under the grader's key. MST
	// checks a config's graders against it before New sees them (a case's
	// expect list is checked by New alone).
	Options json.RawMessage
	// New makes the grader from the value under its key.
	New func(options json.RawMessage) (Grader, error)
}

// Registry holds the grader kinds of a process by name (MST's one
// registry shape): the built-in ones (Builtins) and those its plugins add
// (Plugged). Parse, ParseAll and SchemaOf read it.
type Registry = registry.Registry[*Definition]

// NewRegistry returns a registry of the built-in graders and plugins',
// each of plugins made Plugged. A duplicate name, or a definition without
// New, panics.
func NewRegistry(plugins ...*Definition) *Registry {
	return NewLazyRegistry(func() []*Definition { return plugins })
}

// NewLazyRegistry returns a registry of the built-in graders, and of the
// plugin graders load returns, each made Plugged. load runs on the first
// lookup of a name that is not built in: program plugins are started only
// when one of their graders is used.
func NewLazyRegistry(load func() []*Definition) *Registry {
	return registry.New("grader", func(d *Definition) string { return d.Name }, Builtins(),
		registry.Check(func(d *Definition) error {
			if d.New == nil {
				return errors.New("has no New")
			}
			return nil
		}),
		registry.Lazy(func() []*Definition {
			var out []*Definition
			for _, d := range load() {
				out = append(out, Plugged(d))
			}
			return out
		}),
		registry.Unknown[*Definition](unknownGrader))
}

// builtinRegistry holds the built-in graders alone, for Parse and ParseAll.
var builtinRegistry = sync.OnceValue(func() *Registry { return NewRegistry() })

// unknownGrader says what a grader name that is not known is, with the
// nearest known name when one is near.
func unknownGrader(key string, known []string) error {
	if s := suggest(key, known); s != "" {
		return fmt.Errorf("unknown grader %q (did you mean %s?)", key, s)
	}
	if strings.Count(key, "/") == 2 {
		return fmt.Errorf("unknown grader %q: no plugin of this mst provides it (mst plugins lists them)", key)
	}
	return fmt.Errorf("unknown grader %q (known: %s)", key, strings.Join(known, ", "))
}

// ParseAllIn parses specs with the graders of reg, the built-in ones when
// reg is nil; an error says which spec, by index.
func ParseAllIn(reg *Registry, specs []json.RawMessage) ([]Grader, error) {
	gs := make([]Grader, 0, len(specs))
	for i, s := range specs {
		g, err := ParseIn(reg, s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// SchemaOf is the JSON Schema of one grader spec with the graders of reg:
// a built-in grader (Schema), or a plugin's, each checked against its own
// options schema.
func SchemaOf(reg *Registry) json.RawMessage {
	var alts []string
	for _, d := range reg.All() {
		if builtinName(d.Name) {
			continue
		}
		opts := d.Options
		if len(opts) == 0 {
			opts = json.RawMessage(`{}`)
		}
		key, _ := json.Marshal(d.Name)
		desc, _ := json.Marshal(d.Description)
		alts = append(alts, fmt.Sprintf(`{"type":"object","description":%s,"required":[%s],"additionalProperties":false,"properties":{%s:%s}}`, desc, key, key, opts))
	}
	if len(alts) == 0 {
		return Schema()
	}
	return json.RawMessage(fmt.Sprintf(`{"anyOf":[%s,%s]}`, Schema(), strings.Join(alts, ",")))
}

// Plugged is d as a plugin's grader is registered: its errors are
// prefixed with its name, a nil grader is an error, and its results carry
// its full name whatever label it gives, and a panic in it is its
// result's error, not MST's crash.
func Plugged(d *Definition) *Definition {
	p := *d
	p.New = func(options json.RawMessage) (Grader, error) {
		if d.New == nil {
			return nil, fmt.Errorf("%s: the plugin gave no New", d.Name)
		}
		g, err := d.New(options)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
		if g == nil {
			return nil, fmt.Errorf("%s: the plugin made no grader", d.Name)
		}
		return plugged{name: d.Name, g: g}, nil
	}
	return &p
}

// plugged is a plugin's grader: its results carry the grader's full name,
// whatever label the plugin gives, so that a report never mixes up two
// plugins' graders of one label.
type plugged struct {
	name string
	g    Grader
}

func (p plugged) Name() string {
	if n := p.g.Name(); n != "" && n != p.name {
		return p.name + " " + n
	}
	return p.name
}

func (p plugged) Grade(t *transcript.Transcript) (r Result) {
	defer func() {
		// A plugin's panic is its grader's error, not MST's crash.
		if v := recover(); v != nil {
			r = Result{Grader: p.Name(), Error: fmt.Sprintf("the grader panicked: %v", v)}
		}
	}()
	r = p.g.Grade(t)
	r.Grader = p.Name()
	if r.Passed {
		r.Detail = ""
	}
	return r
}
