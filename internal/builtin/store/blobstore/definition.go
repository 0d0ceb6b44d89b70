package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// Definitions are the bucket stores, one per scheme (gs, s3), as the
// result store registry holds them.
func Definitions() []*store.Definition {
	descriptions := map[string]string{
		"gs": "runs in a Google Cloud Storage bucket: gs://BUCKET/PREFIX (credentials: application default credentials)",
		"s3": "runs in an S3 bucket or an S3-compatible service: s3://BUCKET/PREFIX?region=…&endpoint=… (credentials: the AWS chain)",
	}
	var out []*store.Definition
	for _, scheme := range Schemes {
		out = append(out, &store.Definition{
			Scheme:      scheme,
			Description: descriptions[scheme],
			Open: func(ctx context.Context, u *url.URL, p store.Params) (store.Store, error) {
				pu, err := Parse(u.String())
				if err != nil {
					return nil, store.BadLocation(err)
				}
				return Open(ctx, pu, OptionsOf(p))
			},
			OpenRun:  openRun,
			ListRuns: listRuns,
		})
	}
	return out
}

// OptionsOf are the options of a bucket store opened with p.
func OptionsOf(p store.Params) Options {
	o := Options{Eval: p.Eval, Lease: p.Lease}
	if p.Retrying != nil {
		o.OnRetry = func(r Retry) {
			if !r.GaveUp() { // the call's error says it, where it is reported
				p.Retrying(r.String())
			}
		}
	}
	if d := p.Call; d > 0 {
		o.Limits = Limits{Call: d, Try: d / 3, Backoff: d / 30}
	}
	return o
}

// ref is what the path of a bucket URL names: a run (PREFIX/EVAL/runs/ID),
// an eval's runs (PREFIX/EVAL/runs/), or neither (a store's prefix).
type ref struct {
	u        *url.URL
	key      string // the path without its leading slash
	run      bool
	runsList bool
}

func parseRef(raw string) (ref, error) {
	u, err := Parse(raw)
	if err != nil {
		return ref{}, store.BadLocation(err)
	}
	key := strings.TrimPrefix(u.Path, "/")
	segs := strings.Split(strings.TrimSuffix(key, "/"), "/")
	n := len(segs)
	r := ref{u: u, key: key}
	switch {
	case n >= 2 && segs[n-1] == "runs" && segs[n-2] != "":
		r.runsList = true
	case n >= 3 && segs[n-2] == "runs" && segs[n-1] != "":
		r.run = true
	}
	return r, nil
}

// root opens the bucket of r with no prefix: a run's own key says where
// it is.
func (r ref) root(ctx context.Context, p store.Params) (*Store, error) {
	root := *r.u
	root.Path = ""
	p.Eval = ""
	return Open(ctx, &root, OptionsOf(p))
}

func openRun(ctx context.Context, u *url.URL, p store.Params, redact *secrets.Redactor) (store.Run, error) {
	r, err := parseRef(u.String())
	if err != nil {
		return nil, err
	}
	if !r.run {
		what := "a store"
		if r.runsList {
			what = "an eval's runs (mst report lists them)"
		}
		return nil, store.BadLocation(fmt.Errorf("%s is %s, not a run: give a run's URL, PREFIX/EVAL/runs/RUN-ID, as mst run printed it", u.Redacted(), what))
	}
	s, err := r.root(ctx, p)
	if err != nil {
		return nil, err
	}
	return s.OpenRunAt(ctx, r.key, redact)
}

func listRuns(ctx context.Context, u *url.URL, p store.Params) ([]store.RunSummary, bool, error) {
	r, err := parseRef(u.String())
	if err != nil || !r.runsList {
		return nil, false, nil // opening it as a run says what is wrong
	}
	s, err := r.root(ctx, p)
	if err != nil {
		return nil, true, err
	}
	runs, err := s.ListRuns(ctx, r.key)
	return runs, true, err
}
