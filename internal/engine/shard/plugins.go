package shard

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// PluginVersions returns the versions, by namespace, of the plugins a
// process has for a shard: every Go plugin compiled into it, and the
// program plugins of namespaces. A namespace it does not have is left out.
type PluginVersions func(namespaces []string) map[string]string

// For returns the versions f gives for namespaces: what a bundle's Plugins
// holds (the plugins the coordinator has that a worker of it must have
// too), and what a worker's hello says it has. It is nil when f is nil or
// gives none.
func (f PluginVersions) For(namespaces []string) map[string]string {
	if f == nil {
		return nil
	}
	v := f(namespaces)
	if len(v) == 0 {
		return nil
	}
	return v
}

// checkPlugins compares the worker's plugins with those of its bundle; nil
// when there is no bundle.
func checkPlugins(b *Bundle, have map[string]string) error {
	if b == nil {
		return nil
	}
	return comparePlugins(b.Plugins, have)
}

// comparePlugins says how a worker's plugins differ from those its bundle
// asks for, or returns nil when they are the same.
func comparePlugins(want, have map[string]string) error {
	var diffs []string
	for _, ns := range slices.Sorted(maps.Keys(want)) {
		switch v, ok := have[ns]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("it has no plugin %s (the coordinator has %s)", ns, want[ns]))
		case v != want[ns]:
			diffs = append(diffs, fmt.Sprintf("its plugin %s is %s, the coordinator's %s", ns, v, want[ns]))
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[ns]; !ok {
			diffs = append(diffs, fmt.Sprintf("it has plugin %s %s, which the coordinator does not", ns, have[ns]))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return errors.New(strings.Join(diffs, "; "))
}
