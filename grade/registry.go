package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

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

// Registry holds the grader kinds plugins add. The built-in graders
// (answerContains, toolCalled, judge, …) are not in it: they are always
// there. A nil *Registry holds none.
type Registry struct {
	defs map[string]*Definition
	once sync.Once
	load func() []*Definition
}

// NewLazyRegistry returns a registry filled, on first use, with what load
// returns: program plugins are started only when a grader is looked up.
func NewLazyRegistry(load func() []*Definition) *Registry {
	return &Registry{defs: map[string]*Definition{}, load: load}
}

// ensure fills a lazy registry.
func (r *Registry) ensure() {
	if r == nil || r.load == nil {
		return
	}
	r.once.Do(func() {
		for _, d := range r.load() {
			r.Add(d)
		}
	})
}

// Add registers d.
func (r *Registry) Add(d *Definition) {
	if _, dup := r.defs[d.Name]; dup || contains(graderNames(), d.Name) {
		panic(fmt.Sprintf("grader %q registered twice", d.Name))
	}
	if d.New == nil {
		panic(fmt.Sprintf("grader %q has no New", d.Name))
	}
	r.defs[d.Name] = d
}

// Lookup returns the grader kind named name.
func (r *Registry) Lookup(name string) (*Definition, bool) {
	if r == nil {
		return nil, false
	}
	r.ensure()
	d, ok := r.defs[name]
	return d, ok
}

// Names lists the registered graders alphabetically.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	r.ensure()
	names := make([]string, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Parse is the package's Parse that also knows the registry's graders.
func (r *Registry) Parse(spec json.RawMessage) (Grader, error) { return parse(r, spec) }

// ParseAll is the package's ParseAll that also knows the registry's
// graders.
func (r *Registry) ParseAll(specs []json.RawMessage) ([]Grader, error) {
	gs := make([]Grader, 0, len(specs))
	for i, s := range specs {
		g, err := r.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// Schema is the JSON Schema of one grader spec: a built-in grader, or one
// of the registry's, each checked against its own options schema.
func (r *Registry) Schema() json.RawMessage {
	names := r.Names()
	if len(names) == 0 {
		return Schema()
	}
	var alts []string
	for _, n := range names {
		d := r.defs[n]
		opts := d.Options
		if len(opts) == 0 {
			opts = json.RawMessage(`{}`)
		}
		key, _ := json.Marshal(n)
		desc, _ := json.Marshal(d.Description)
		alts = append(alts, fmt.Sprintf(`{"type":"object","description":%s,"required":[%s],"additionalProperties":false,"properties":{%s:%s}}`, desc, key, key, opts))
	}
	return json.RawMessage(fmt.Sprintf(`{"anyOf":[%s,%s]}`, Schema(), strings.Join(alts, ",")))
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

type registryKey struct{}

// WithRegistry returns ctx carrying r: the graders that plugins add, for
// the code below that parses graders (a plan, a report, a grade worker).
// mst sets it once per command.
func WithRegistry(ctx context.Context, r *Registry) context.Context {
	return context.WithValue(ctx, registryKey{}, r)
}

// RegistryFrom returns the registry ctx carries, nil (no plugin graders)
// when it carries none.
func RegistryFrom(ctx context.Context) *Registry {
	r, _ := ctx.Value(registryKey{}).(*Registry)
	return r
}
