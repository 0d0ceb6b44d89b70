package client

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Registry holds client definitions by name. Built-ins are registered in one
// place (internal/builtin); a custom build of mst may add its own.
type Registry struct {
	defs map[string]*Definition
}

// NewRegistry returns a registry holding defs. A duplicate name, or a
// definition with neither Open nor Run, panics: both are programming errors.
func NewRegistry(defs ...*Definition) *Registry {
	r := &Registry{defs: map[string]*Definition{}}
	for _, d := range defs {
		r.Add(d)
	}
	return r
}

// Add registers d.
func (r *Registry) Add(d *Definition) {
	if _, dup := r.defs[d.Name]; dup {
		panic(fmt.Sprintf("client %q registered twice", d.Name))
	}
	if d.Open == nil && d.Run == nil {
		panic(fmt.Sprintf("client %q has neither Open nor Run", d.Name))
	}
	r.defs[d.Name] = d
}

// Lookup returns the definition named name, or an error that lists the
// known names.
func (r *Registry) Lookup(name string) (*Definition, error) {
	if d, ok := r.defs[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("unknown client %q (known: %s)", name, strings.Join(r.Names(), ", "))
}

// Names lists the registered clients in alphabetical order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CheckOS reports whether the client named name can run on goos (a GOOS
// value) in this build. It returns, in this order: the registry's error for
// an unknown name; an error naming the client's operating systems when its
// requirements do not include goos; the client's own Available error. A
// client that lists no OS runs on any.
func (r *Registry) CheckOS(name, goos string) error {
	d, err := r.Lookup(name)
	if err != nil {
		return err
	}
	if oses := d.Requirements.OS; len(oses) > 0 && !slices.Contains(oses, goos) {
		names := make([]string, len(oses))
		for i, o := range oses {
			names[i] = OSName(o)
		}
		return fmt.Errorf("client %s runs on %s; this run's machine is %s", name, strings.Join(names, ", "), OSName(goos))
	}
	if d.Available != nil {
		return d.Available(goos)
	}
	return nil
}

// OSName returns the name people use for a GOOS value: "macos" for darwin,
// the value itself otherwise.
func OSName(goos string) string {
	if goos == "darwin" {
		return "macos"
	}
	return goos
}
