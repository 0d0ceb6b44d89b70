package client

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mst-eval/mst/internal/ground/registry"
)

// Registry holds client definitions by name (MST's one registry shape).
// Built-ins are registered in one place (internal/builtin), with what a
// build's plugins add.
type Registry = registry.Registry[*Definition]

// NewRegistry returns a registry holding defs. A duplicate name, or a
// definition with neither Open nor Run, panics: both are programming errors.
func NewRegistry(defs ...*Definition) *Registry {
	return registry.New("client", func(d *Definition) string { return d.Name }, defs, registry.Check(func(d *Definition) error {
		if d.Open == nil && d.Run == nil {
			return errors.New("has neither Open nor Run")
		}
		return nil
	}))
}

// CheckOS reports whether the client named name can run on goos (a GOOS
// value) in this build. It returns, in this order: the registry's error for
// an unknown name; an error naming the client's operating systems when its
// requirements do not include goos; the client's own Available error. A
// client that lists no OS runs on any.
func CheckOS(r *Registry, name, goos string) error {
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
