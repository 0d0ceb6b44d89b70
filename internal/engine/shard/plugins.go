package shard

import (
	"context"
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

type pluginsKey struct{}

// WithPluginVersions returns ctx carrying f, which bundles (Bundle.Plugins)
// and hellos (Hello.Plugins) are filled from. mst sets it once per
// command.
func WithPluginVersions(ctx context.Context, f PluginVersions) context.Context {
	return context.WithValue(ctx, pluginsKey{}, f)
}

// pluginVersions asks ctx's PluginVersions; nil when ctx has none.
func pluginVersions(ctx context.Context, namespaces []string) map[string]string {
	f, _ := ctx.Value(pluginsKey{}).(PluginVersions)
	if f == nil {
		return nil
	}
	v := f(namespaces)
	if len(v) == 0 {
		return nil
	}
	return v
}

// BundlePlugins is what a bundle's Plugins holds: the versions of the
// plugins the coordinator has that a worker of it must have too.
func BundlePlugins(ctx context.Context, namespaces []string) map[string]string {
	return pluginVersions(ctx, namespaces)
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
