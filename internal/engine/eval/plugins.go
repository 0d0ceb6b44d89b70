package eval

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// SourceCatalog is a Catalog that knows dataset sources (those plugins
// add). A Catalog without it knows none.
type SourceCatalog interface {
	// SourceOptions returns the JSON Schema of a dataset source's options;
	// an unknown source is an error that lists the known ones.
	SourceOptions(source string) (json.RawMessage, error)
}

// PluginCatalog is a Catalog that knows which plugins this mst has.
type PluginCatalog interface {
	// PluginVersion returns the version of the plugin of a namespace, and
	// false when this mst has no such plugin.
	PluginVersion(namespace string) (string, bool)
}

// checkSource checks a datasets entry that names a source.
func (l *loader) checkSource(at []string, entry map[string]any) {
	name, _ := entry["source"].(string)
	if name == "" {
		return // the schema reports it
	}
	sc, ok := l.cat.(SourceCatalog)
	if !ok {
		l.add(child(at, "source"), fmt.Sprintf("unknown dataset source %q: this mst has no dataset sources", name))
		return
	}
	schema, err := sc.SourceOptions(name)
	if err != nil {
		l.add(child(at, "source"), err.Error()+l.installHint(name))
		return
	}
	if len(schema) == 0 {
		return
	}
	opts, has := entry["options"]
	if !has {
		opts = map[string]any{}
	}
	data, err := json.Marshal(opts)
	if err != nil {
		return
	}
	msgs, err := CheckOptions(schema, data)
	if err != nil {
		l.add(child(at, "source"), fmt.Sprintf("the options schema of %s is broken (a fault of the plugin): %v", name, err))
		return
	}
	for _, m := range msgs {
		l.add(child(at, "options"), m)
	}
}

// checkPlugins checks that this mst has every plugin the eval lists, at
// the version it gives.
func (l *loader) checkPlugins(root map[string]any) {
	need, _ := root["plugins"].(map[string]any)
	if len(need) == 0 {
		return
	}
	pc, _ := l.cat.(PluginCatalog)
	for _, ns := range sortedKeys(need) {
		entry, _ := need[ns].(map[string]any)
		want, _ := entry["version"].(string)
		from, _ := entry["from"].(string)
		at := []string{"plugins", ns}
		var have string
		var ok bool
		if pc != nil {
			have, ok = pc.PluginVersion(ns)
		}
		switch {
		case !ok:
			l.add(at, "this mst has no plugin "+ns+": "+installWords(ns, from, want))
		case want != "" && have != want:
			l.add(child(at, "version"), fmt.Sprintf("this mst has plugin %s %s, and the eval needs %s: %s", ns, have, want, installWords(ns, from, want)))
		}
	}
}

// installHint is the end of an error about an unknown name of a plugin
// kind: how to get the plugin, when the eval lists it.
func (l *loader) installHint(full string) string {
	if strings.Count(full, "/") != 2 {
		return ""
	}
	ns, _, _ := strings.Cut(full, "/")
	need, _ := l.doc.root.(map[string]any)["plugins"].(map[string]any)
	entry, listed := need[ns].(map[string]any)
	if !listed {
		return fmt.Sprintf(" (the eval's plugins list has no %s: list it with where to get it, and install it)", ns)
	}
	from, _ := entry["from"].(string)
	want, _ := entry["version"].(string)
	return "; " + installWords(ns, from, want)
}

// installWords says how to install a plugin.
func installWords(ns, from, version string) string {
	program := "put its program mst-plugin-" + ns + " in a folder on MST_PLUGIN_PATH"
	if from == "" {
		return "install it (a Go plugin: mst build --with ITS-MODULE; a program plugin: " + program + ")"
	}
	if goModule(from) {
		at := from
		if version != "" {
			v := version
			if !strings.HasPrefix(v, "v") {
				v = "v" + v
			}
			at += "@" + v
		}
		return "build an mst with it: mst build --with " + at + " (or, if it is a program plugin, " + program + ")"
	}
	return "get it from " + strconv.Quote(from) + " and " + program
}

// goModule reports whether s looks like a Go module path (host/path).
func goModule(s string) bool {
	host, _, ok := strings.Cut(s, "/")
	return ok && strings.Contains(host, ".") && !strings.Contains(s, "://") && !strings.ContainsAny(s, " \t")
}
