// Package plugin is how MST is extended from outside its tree: runners,
// clients, dataset sources, graders and credential stores that another
// team writes, versions and ships on its own.
//
// There are two kinds of plugin (docs/design/021-plugins.md says why):
//
//   - A Go plugin is a Go package with a function that returns a Plugin.
//     It is compiled into a build of mst of its own, made with
//     `mst build --with MODULE` (or a short main that calls
//     mstcmd.Main). It can add every kind.
//   - A program plugin is an executable named mst-plugin-NAMESPACE, in
//     any language, that MST finds on MST_PLUGIN_PATH and talks to over
//     its stdin and stdout with the mst.plugin/v1 protocol (protocol.go).
//     It can add clients (one trial at a time, behind MST's proxies),
//     dataset sources and graders.
//
// Every kind a plugin adds is named NAMESPACE/KIND/NAME
// (acme/runner/cloud-vm, acme/grader/sql-result), so two plugins never take
// each other's names, nor MST's. `mst plugins` lists what a build has.
package plugin

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/runner"
)

// Plugin is a Go plugin: what it is and the kinds it adds. Each
// definition gives its short name (Name: "cloud-vm"); MST registers it
// under NAMESPACE/KIND/NAME. A definition must not be shared with another
// Plugin value: MST registers a copy.
type Plugin struct {
	// Namespace is the plugin's own prefix: lowercase letters, digits and
	// '-', starting with a letter, 2 to 40 characters. "mst" is MST's.
	Namespace string
	// Version is the plugin's version (semantic versioning, such as
	// "1.4.0"). Workers must run the coordinator's version of every
	// plugin: a worker that reports another is refused at hello.
	Version string
	// Description says in one line what the plugin is for.
	Description string
	// Module is where the plugin comes from (a Go module path), shown by
	// mst plugins and in hints to install it.
	Module string

	Runners          []*runner.Definition
	Clients          []*client.Definition
	DatasetSources   []*dataset.SourceDefinition
	Graders          []*grade.Definition
	CredentialStores []*credstore.Definition
}

// The kinds, as they appear in names.
const (
	KindRunner          = "runner"
	KindClient          = "client"
	KindDataset         = "dataset"
	KindGrader          = "grader"
	KindCredentialStore = "credential-store"
)

// Kinds lists the kinds in the order mst plugins shows them.
func Kinds() []string {
	return []string{KindRunner, KindClient, KindDataset, KindGrader, KindCredentialStore}
}

// Reserved is MST's own namespace.
const Reserved = "mst"

var (
	namespaceRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,39}$`)
	nameRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
)

// CheckNamespace says what is wrong with a namespace.
func CheckNamespace(ns string) error {
	if ns == Reserved {
		return fmt.Errorf("namespace %q is MST's own; choose your organization's or project's name", ns)
	}
	if !namespaceRE.MatchString(ns) {
		return fmt.Errorf("namespace %q: use 2 to 40 lowercase letters, digits and '-', starting with a letter (such as \"acme\")", ns)
	}
	return nil
}

// CheckName says what is wrong with the short name of a kind.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("name %q: use up to 63 lowercase letters, digits, '.', '_' and '-', starting with a letter or digit (such as \"cloud-vm\")", name)
	}
	return nil
}

// FullName is NAMESPACE/KIND/NAME.
func FullName(namespace, kind, name string) string {
	return namespace + "/" + kind + "/" + name
}

// SplitName splits a full name; ok is false for a name that has not three
// parts (a built-in name such as "docker").
func SplitName(full string) (namespace, kind, name string, ok bool) {
	parts := strings.Split(full, "/")
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}
