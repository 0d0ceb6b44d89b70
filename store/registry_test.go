package store_test

import (
	"net/url"
	"path/filepath"
	"testing"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// The folder store as the registry serves it, and the error for a scheme
// no store serves.
func TestDirDefinition(t *testing.T) {
	t.Parallel()
	reg := store.NewRegistry(store.DirDefinition(), &store.Definition{Scheme: "gs", Open: store.DirDefinition().Open, OpenRun: store.DirDefinition().OpenRun, ListRuns: store.DirDefinition().ListRuns})
	def, err := reg.Lookup(store.DirScheme)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ctx := t.Context()
	st, err := def.Open(ctx, &url.URL{Scheme: store.DirScheme, Path: root}, store.Params{Eval: "weather"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.Create(ctx, "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.WriteRun(ctx, transcript.Run{ID: "r1", Eval: "weather"}); err != nil {
		t.Fatal(err)
	}
	got, err := def.OpenRun(ctx, &url.URL{Scheme: store.DirScheme, Path: run.Location()}, store.Params{}, nil)
	if err != nil || got.ID() != "r1" {
		t.Fatalf("OpenRun(the run's folder) = %v, %v", got, err)
	}
	runs := filepath.Dir(run.Location())
	list, ok, err := def.ListRuns(ctx, &url.URL{Scheme: store.DirScheme, Path: runs}, store.Params{})
	if err != nil || !ok || len(list) != 1 || list[0].ID != "r1" {
		t.Errorf("ListRuns(%s) = %v, %t, %v; want r1", runs, list, ok, err)
	}
	if _, ok, _ := def.ListRuns(ctx, &url.URL{Scheme: store.DirScheme, Path: run.Location()}, store.Params{}); ok {
		t.Error("ListRuns of a run's folder said it lists runs")
	}
	_, err = reg.Lookup("azblob")
	if want := "MST cannot keep results at a azblob: URL; it keeps them in a folder, at gs://BUCKET/PREFIX"; err == nil || err.Error() != want {
		t.Errorf("Lookup(azblob) = %v; want %q", err, want)
	}
}
