package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// SearchPathVar names the variable that lists the folders program plugins
// are found in, as PATH does (':'-separated on Unix).
const SearchPathVar = "MST_PLUGIN_PATH"

// Installed is the plugins one mst process has: the Go plugins compiled
// into it, and the program plugins on its search path. Program plugins are
// started only when Load is called, so commands that use no plugin kind
// never start them.
type Installed struct {
	compiled []Plugin
	programs []*Program
	shadowed []string

	mu       sync.Mutex
	loaded   bool
	plugins  []Plugin
	problems map[string]error // by namespace
}

// Install checks the compiled-in plugins and finds the program plugins on
// searchPath. A compiled-in plugin with a bad or taken namespace, or kinds
// with bad or repeated names, is left out and its problem kept (Problems);
// a program plugin whose namespace a compiled-in plugin has is left out
// too.
func Install(compiled []Plugin, searchPath, mstVersion string) *Installed {
	in := &Installed{problems: map[string]error{}}
	taken := map[string]bool{}
	for _, p := range compiled {
		if err := checkPlugin(p); err != nil {
			in.problems[p.Namespace] = err
			continue
		}
		if taken[p.Namespace] {
			in.problems[p.Namespace] = fmt.Errorf("plugin namespace %q is compiled in twice; each plugin has its own namespace", p.Namespace)
			continue
		}
		taken[p.Namespace] = true
		in.compiled = append(in.compiled, p)
	}
	programs, shadowed := FindPrograms(searchPath)
	in.shadowed = shadowed
	for _, pr := range programs {
		pr.MSTVersion = mstVersion
		if err := CheckNamespace(pr.Namespace); err != nil {
			in.problems[pr.Namespace] = fmt.Errorf("program %s: %w", pr.Path, err)
			continue
		}
		if taken[pr.Namespace] {
			in.problems[pr.Namespace] = fmt.Errorf("program %s: namespace %q is taken by a plugin compiled into this mst; remove one of them", pr.Path, pr.Namespace)
			continue
		}
		in.programs = append(in.programs, pr)
	}
	return in
}

// checkPlugin checks a Go plugin's namespace, version and names.
func checkPlugin(p Plugin) error {
	if err := CheckNamespace(p.Namespace); err != nil {
		return err
	}
	if p.Version == "" {
		return fmt.Errorf("plugin %s has no Version", p.Namespace)
	}
	seen := map[string]bool{}
	check := func(kind, name string) error {
		if err := CheckName(name); err != nil {
			return fmt.Errorf("plugin %s: %s %w", p.Namespace, kind, err)
		}
		full := FullName(p.Namespace, kind, name)
		if seen[full] {
			return fmt.Errorf("plugin %s adds %s twice", p.Namespace, full)
		}
		seen[full] = true
		return nil
	}
	var errs []error
	for _, d := range p.Runners {
		errs = append(errs, check(KindRunner, d.Name))
	}
	for _, d := range p.Clients {
		errs = append(errs, check(KindClient, d.Name))
	}
	for _, d := range p.DatasetSources {
		errs = append(errs, check(KindDataset, d.Name))
	}
	for _, d := range p.Graders {
		errs = append(errs, check(KindGrader, d.Name))
	}
	for _, d := range p.CredentialStores {
		errs = append(errs, check(KindCredentialStore, d.Name))
	}
	return errors.Join(errs...)
}

// Compiled returns the Go plugins compiled in (those without problems).
func (in *Installed) Compiled() []Plugin { return slices.Clone(in.compiled) }

// Load starts every program plugin, once, and returns every plugin that
// works: the compiled-in ones, then the programs by namespace. A program
// that fails is left out; Problems says why.
func (in *Installed) Load(ctx context.Context) []Plugin {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.loaded {
		in.loaded = true
		in.plugins = slices.Clone(in.compiled)
		for _, pr := range in.programs {
			p, err := pr.Plugin(ctx)
			if err == nil {
				err = checkPlugin(p)
			}
			if err != nil {
				in.problems[pr.Namespace] = err
				continue
			}
			in.plugins = append(in.plugins, p)
		}
	}
	return slices.Clone(in.plugins)
}

// Program returns the program plugin of a namespace, if there is one.
func (in *Installed) Program(namespace string) (*Program, bool) {
	for _, p := range in.programs {
		if p.Namespace == namespace {
			return p, true
		}
	}
	return nil, false
}

// Problems returns why plugins were left out, by namespace, and the
// programs other programs of the same name shadow. Program plugins'
// problems are known once Load was called.
func (in *Installed) Problems() (problems map[string]error, shadowed []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.problems), slices.Clone(in.shadowed)
}

// Versions returns the version of each plugin of namespaces (all the
// compiled-in ones when namespaces is nil), loading program plugins as
// needed; a namespace this process does not have is left out.
func (in *Installed) Versions(ctx context.Context, namespaces []string) map[string]string {
	out := map[string]string{}
	var plugins []Plugin
	if namespaces == nil {
		plugins = in.compiled
	} else {
		plugins = in.Load(ctx)
	}
	for _, p := range plugins {
		if namespaces == nil || slices.Contains(namespaces, p.Namespace) {
			out[p.Namespace] = p.Version
		}
	}
	return out
}

// Close stops the program plugins that were started.
func (in *Installed) Close() error {
	var errs []error
	for _, p := range in.programs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
