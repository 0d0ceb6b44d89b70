package blobstore_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// The bucket stores as the registry serves them: a store by its URL, a
// run by its own URL, an eval's runs by theirs, and a URL that names
// something else refused with what to give.
func TestDefinitions(t *testing.T) {
	t.Parallel()
	reg := store.NewRegistry(blobstore.Definitions()...)
	if got := reg.Names(); strings.Join(got, ",") != "gs,s3" {
		t.Fatalf("schemes = %q, want gs and s3", got)
	}
	e := startS3(t)
	u := e.newBucket(t, "team")
	def, err := reg.Lookup(u.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var retries []string
	p := store.Params{Eval: "weather", Retrying: func(what string) { retries = append(retries, what) }}
	st, err := def.Open(ctx, u, p)
	if err != nil {
		t.Fatalf("Open(%s) = %v", u.Redacted(), err)
	}
	run, err := st.Create(ctx, "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.WriteRun(ctx, transcript.Run{ID: "r1", Eval: "weather"}); err != nil {
		t.Fatal(err)
	}
	runURL, err := url.Parse(run.Location())
	if err != nil {
		t.Fatal(err)
	}
	got, err := def.OpenRun(ctx, runURL, p, nil)
	if err != nil || got.ID() != "r1" {
		t.Fatalf("OpenRun(the run's own URL) = %v, %v; want run r1", got, err)
	}
	runs := *runURL
	runs.Path = strings.TrimSuffix(strings.TrimSuffix(runs.Path, "/"), "/r1") + "/"
	list, ok, err := def.ListRuns(ctx, &runs, p)
	if err != nil || !ok || len(list) != 1 || list[0].ID != "r1" {
		t.Errorf("ListRuns(%s) = %v, %t, %v; want r1", runs.Path, list, ok, err)
	}
	if _, ok, _ := def.ListRuns(ctx, runURL, p); ok {
		t.Errorf("ListRuns of a run's URL said it lists runs")
	}
	for what, at := range map[string]*url.URL{"an eval's runs": &runs, "a store": u} {
		_, err := def.OpenRun(ctx, at, p, nil)
		if !errors.Is(err, store.ErrBadLocation) || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), "not a run") {
			t.Errorf("OpenRun(%s) = %v; want ErrBadLocation saying it is %s, not a run", at.Redacted(), err, what)
		}
	}
	bad := &url.URL{Scheme: "s3", Opaque: "bucket/p"}
	if _, err := def.Open(ctx, bad, p); !errors.Is(err, store.ErrBadLocation) || !strings.Contains(err.Error(), "name the bucket") {
		t.Errorf("Open(s3:bucket/p) = %v; want ErrBadLocation saying to name the bucket", err)
	}
	if len(retries) != 0 {
		t.Errorf("a store that answered reported retries: %q", retries)
	}
}
