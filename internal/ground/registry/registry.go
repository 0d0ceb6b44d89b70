// Package registry is the one shape of MST's extension registries: the
// runners, clients, model providers, result stores, graders, dataset
// sources and credential stores a process knows, each kind in a Registry
// of its definitions by name. A process builds its registries once, with
// the built-ins and its plugins (internal/builtin), and passes them as
// values to what needs them.
package registry

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Registry holds the definitions of one kind by name. Definitions are
// added while the registry is built; after that it is only read, from any
// goroutine. A lazy registry (Lazy) is filled on its first read. A nil
// *Registry holds nothing.
type Registry[D any] struct {
	kind    string
	name    func(D) string
	check   func(D) error
	unknown func(name string, known []string) error
	fill    func() []D
	once    sync.Once
	filling bool
	defs    map[string]D // added while the registry is built
	late    map[string]D // added by fill, on the first read that needs it
}

// Option sets up a registry.
type Option[D any] func(*Registry[D])

// Check makes Add refuse a definition for which f returns an error: a
// definition without what its kind needs is a programming error.
func Check[D any](f func(D) error) Option[D] {
	return func(r *Registry[D]) { r.check = f }
}

// Lazy fills the registry with what f returns on the first read that
// needs it (a name not added eagerly, or a listing), so what f starts
// (program plugins) starts only when the kind is used.
func Lazy[D any](f func() []D) Option[D] {
	return func(r *Registry[D]) { r.fill = f }
}

// Unknown makes Lookup's error for a name the registry lacks f's: for
// kinds whose unknown names deserve more than the list of known ones.
func Unknown[D any](f func(name string, known []string) error) Option[D] {
	return func(r *Registry[D]) { r.unknown = f }
}

// New returns a registry of the kind named kind ("runner", "dataset
// source"), which names each definition with name, holding defs.
func New[D any](kind string, name func(D) string, defs []D, opts ...Option[D]) *Registry[D] {
	r := &Registry[D]{kind: kind, name: name, defs: map[string]D{}, late: map[string]D{}}
	for _, o := range opts {
		o(r)
	}
	for _, d := range defs {
		r.Add(d)
	}
	return r
}

// Add registers d. A name already taken, an empty one, or a definition
// Check refuses panics: each is a mistake in the code that builds the
// registry, never in a user's input.
func (r *Registry[D]) Add(d D) {
	n := r.name(d)
	if n == "" {
		panic(fmt.Sprintf("a %s without a name", r.kind))
	}
	_, dup := r.defs[n]
	if _, late := r.late[n]; dup || late {
		panic(fmt.Sprintf("%s %q registered twice", r.kind, n))
	}
	if r.check != nil {
		if err := r.check(d); err != nil {
			panic(fmt.Sprintf("%s %q: %v", r.kind, n, err))
		}
	}
	if r.filling {
		r.late[n] = d
		return
	}
	r.defs[n] = d
}

func (r *Registry[D]) ensure() {
	if r.fill == nil {
		return
	}
	r.once.Do(func() {
		r.filling = true
		for _, d := range r.fill() {
			r.Add(d)
		}
		r.filling = false
	})
}

// Get returns the definition named name, and whether there is one.
func (r *Registry[D]) Get(name string) (D, bool) {
	if r == nil {
		var zero D
		return zero, false
	}
	if d, ok := r.defs[name]; ok {
		return d, true
	}
	r.ensure()
	d, ok := r.late[name]
	return d, ok
}

// Lookup returns the definition named name, or an error that names the
// known ones: unknown runner "dokcer" (known: docker, local, processes).
func (r *Registry[D]) Lookup(name string) (D, error) {
	if d, ok := r.Get(name); ok {
		return d, nil
	}
	var zero D
	known := r.Names()
	if r != nil && r.unknown != nil {
		return zero, r.unknown(name, known)
	}
	kind := "definition"
	if r != nil {
		kind = r.kind
	}
	if len(known) == 0 {
		return zero, fmt.Errorf("unknown %s %q: none is known", kind, name)
	}
	return zero, fmt.Errorf("unknown %s %q (known: %s)", kind, name, strings.Join(known, ", "))
}

// Names lists the definitions' names alphabetically.
func (r *Registry[D]) Names() []string {
	if r == nil {
		return nil
	}
	r.ensure()
	names := make([]string, 0, len(r.defs)+len(r.late))
	for n := range r.defs {
		names = append(names, n)
	}
	for n := range r.late {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// All returns the definitions in the order of their names.
func (r *Registry[D]) All() []D {
	names := r.Names()
	out := make([]D, len(names))
	for i, n := range names {
		d, ok := r.defs[n]
		if !ok {
			d = r.late[n]
		}
		out[i] = d
	}
	return out
}

// Kind is the name of the registry's kind, as its errors say it.
func (r *Registry[D]) Kind() string { return r.kind }
