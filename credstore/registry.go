package credstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/mst-eval/mst/internal/ground/registry"
)

// Definition describes a kind of credential store.
type Definition struct {
	// Name is what --store takes.
	Name        string
	Description string
	// Shared is true when other machines reach the same grants (a secret
	// manager in the cloud, say), as a detached run's coordinator machine
	// needs. A store on this machine's disk is not shared.
	Shared bool
	// Create opens the store. It may do nothing on disk or the network
	// until the store is first used.
	Create func(ctx context.Context, p Params) (Store, error)
}

// Params is what a store is opened with.
type Params struct {
	// Options are the store's own settings by name (for local: dir and
	// key-file). A store refuses a name it does not know.
	Options map[string]string
	Logger  *slog.Logger
	// Secret returns a secret of the secrets file (--secrets-file) by
	// name, such as KeySecret; nil when there is no secrets file.
	Secret func(name string) (string, bool)
	// LockWaiting, when set, is called with a server's name when WithLock
	// has to wait for another holder of its lock (for a message such as
	// "waiting for another mst that is refreshing SERVER's grant").
	LockWaiting func(server string)
	// Results is the URL of the results store of the run or the eval
	// (--results, or the eval's results.store), "" when neither names
	// one: a store may keep its grants there.
	Results string
}

// SecretValue returns the secret name from p.Secret.
func (p Params) SecretValue(name string) (string, bool) {
	if p.Secret == nil {
		return "", false
	}
	return p.Secret(name)
}

// CheckOptions returns an error naming the first option in p that is not
// one of known, and the known ones.
func (p Params) CheckOptions(store string, known ...string) error {
	var keys []string
	for k := range p.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return &OptionError{fmt.Errorf("the %s credential store takes no options; got %q", store, k)}
			}
			return &OptionError{fmt.Errorf("the %s credential store has no option %q (known: %s)", store, k, strings.Join(known, ", "))}
		}
	}
	return nil
}

// OptionError is a store's refusal of its options (--store-option): one
// it does not know, or a value it cannot use.
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// Registry holds credential store definitions by name (MST's one registry
// shape).
type Registry = registry.Registry[*Definition]

// NewRegistry returns a registry of defs; a duplicate name panics.
func NewRegistry(defs ...*Definition) *Registry {
	return registry.New("credential store", func(d *Definition) string { return d.Name }, defs)
}
