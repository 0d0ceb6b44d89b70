package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/ground/registry"
	"github.com/mst-eval/mst/secrets"
)

// Definition is a kind of result store, known by the URL scheme of the
// locations it serves: "file" for a folder on this machine (a plain path
// is one), "gs" and "s3" for buckets. Every location a person gives MST
// (--results, a run's URL, an eval's runs) reaches its store through the
// definition of its scheme.
type Definition struct {
	Scheme      string
	Description string
	// Open opens the store at u for new runs of p.Eval ("" for a store
	// whose runs are found by id under any eval). A store it cannot reach
	// within its bounds fails wrapping ErrUnavailable.
	Open func(ctx context.Context, u *url.URL, p Params) (Store, error)
	// OpenRun opens the run u names, its location as Run.Location gives
	// it; anything else fails with an error that says what u names
	// instead and what to give.
	OpenRun func(ctx context.Context, u *url.URL, p Params, redact *secrets.Redactor) (Run, error)
	// ListRuns lists, newest first (SortRuns), the runs of the eval whose
	// runs u names (ROOT/EVAL/runs); ok is false when u names no eval's
	// runs.
	ListRuns func(ctx context.Context, u *url.URL, p Params) (runs []RunSummary, ok bool, err error)
}

// Params is what a result store is opened with.
type Params struct {
	// Eval is the eval whose runs Create makes.
	Eval string
	// Retrying, when set, is told of each call the store makes again
	// after a failure, in words a person waiting reads ("store not
	// answering (gs://b/p): retry 3 in 4s: …"). A folder never retries.
	Retrying func(what string)
	// Lease is how long a run's lock holds without renewal, Call how long
	// one call may take with its retries; zero means the store's own.
	Lease, Call time.Duration
}

// Registry holds result store kinds by scheme (MST's one registry shape).
type Registry = registry.Registry[*Definition]

// NewRegistry returns a registry of defs; a scheme served twice, or a
// definition without Open, OpenRun or ListRuns, panics.
func NewRegistry(defs ...*Definition) *Registry {
	return registry.New("result store", func(d *Definition) string { return d.Scheme }, defs,
		registry.Check(func(d *Definition) error {
			if d.Open == nil || d.OpenRun == nil || d.ListRuns == nil {
				return errors.New("needs Open, OpenRun and ListRuns")
			}
			return nil
		}),
		registry.Unknown[*Definition](func(scheme string, known []string) error {
			return fmt.Errorf("MST cannot keep results at a %s: URL; it keeps them in a folder%s", scheme, schemeList(known))
		}))
}

// schemeList says where, besides a folder, the schemes keep results:
// ", at gs://BUCKET/PREFIX or at s3://BUCKET/PREFIX".
func schemeList(schemes []string) string {
	var forms []string
	for _, s := range schemes {
		if s != DirScheme {
			forms = append(forms, "at "+s+"://BUCKET/PREFIX")
		}
	}
	if len(forms) == 0 {
		return ""
	}
	if len(forms) == 1 {
		return ", " + forms[0]
	}
	return ", " + strings.Join(forms[:len(forms)-1], ", ") + " or " + forms[len(forms)-1]
}

// DirScheme is the scheme of a folder on this machine.
const DirScheme = "file"

// DirDefinition is the store of runs in a folder on this machine
// (file:///path, or a plain path).
func DirDefinition() *Definition {
	return &Definition{
		Scheme:      DirScheme,
		Description: "runs in a folder on this machine, one folder per run",
		Open: func(_ context.Context, u *url.URL, p Params) (Store, error) {
			return Dir{Root: u.Path, Eval: p.Eval}, nil
		},
		OpenRun: func(_ context.Context, u *url.URL, _ Params, redact *secrets.Redactor) (Run, error) {
			return OpenRunDir(u.Path, redact)
		},
		ListRuns: func(ctx context.Context, u *url.URL, _ Params) ([]RunSummary, bool, error) {
			if !IsRunsDir(u.Path) {
				return nil, false, nil
			}
			runs, err := ListRunDir(ctx, u.Path)
			return runs, true, err
		},
	}
}
