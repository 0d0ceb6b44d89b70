package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// evalNames are eval names of every kind a config can hold: plain,
// spaces, case that folds, Unicode, a Windows device name, separators,
// dots, a name like the runs folder's, and one far longer than a file
// name can be.
var evalNames = []string{
	"weather", "Weather", "Weather Q1", "天気予報", "CON", "a/b", `a\b`, "..", ".", "runs",
	strings.Repeat("東", 100), strings.Repeat("eval", 80),
}

// TestDirEvalFolder: a new run goes to ROOT/EVAL/runs/ID, EVAL being the
// segment a bucket store's keys have for the name (store.SafeName), one
// folder of at most 200 bytes that no two names share, and is found by id
// with or without the eval.
func TestDirEvalFolder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	seen := map[string]string{}
	for i, name := range evalNames {
		id := "run-" + string(rune('a'+i))
		d := store.Dir{Root: root, Eval: name}
		r := create(t, d, id)
		seg := store.SafeName(name)
		if want := filepath.Join(root, seg, "runs", id); r.Location() != want {
			t.Errorf("eval %q: run at %s, want %s", name, r.Location(), want)
		}
		if len(seg) > 200 || strings.ContainsAny(seg, `/\`) || seg == "." || seg == ".." {
			t.Errorf("eval %q: folder name %q is not one file name of at most 200 bytes", name, seg)
		}
		if other, ok := seen[strings.ToLower(seg)]; ok {
			t.Errorf("evals %q and %q share the folder %s where case is ignored", name, other, seg)
		}
		seen[strings.ToLower(seg)] = name
		if got := store.EvalRunsDir(root, name); got != filepath.Dir(r.Location()) {
			t.Errorf("EvalRunsDir(%q) = %s, want %s", name, got, filepath.Dir(r.Location()))
		}
		for _, od := range []store.Dir{{Root: root}, d} {
			o, err := od.Open(ctx, id, nil)
			if err != nil || o.Location() != r.Location() {
				t.Errorf("Dir{Eval: %q}.Open(%s) = %v, %v; want the run at %s", od.Eval, id, o, err, r.Location())
			}
		}
	}
	if _, err := (store.Dir{Root: root, Eval: "weather"}).Open(ctx, "run-c", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open of another eval's run under eval weather = %v, want ErrNotFound", err)
	}
}

// TestDirCreateNeedsEval: a store with no eval cannot say where a new run
// goes, and makes nothing.
func TestDirCreateNeedsEval(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "results")
	if _, err := (store.Dir{Root: root}).Create(t.Context(), "r", nil); err == nil || !strings.Contains(err.Error(), "Eval") {
		t.Errorf("Create without an eval = %v, want an error naming Dir.Eval", err)
	}
	if _, err := os.Stat(root); err == nil {
		t.Errorf("Create without an eval made %s", root)
	}
}

// copyOldRun puts the run an older MST stored (testdata/oldrun) at
// ROOT/id, where older versions put every run.
func copyOldRun(t *testing.T, root, id string) string {
	t.Helper()
	dir := filepath.Join(root, id)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "oldrun"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDirOldLayout: runs of older versions, at ROOT/ID, open by id
// beside new runs, whatever the store's eval; an id at two places is an
// error naming both; and Create does not make an id an older run has.
func TestDirOldLayout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	old := copyOldRun(t, root, "oldrun")
	fresh := create(t, store.Dir{Root: root, Eval: "weather"}, "new-1")
	for _, d := range []store.Dir{{Root: root}, {Root: root, Eval: "weather"}, {Root: root, Eval: "maps"}} {
		r, err := d.Open(ctx, "oldrun", nil)
		if err != nil || r.Location() != old {
			t.Errorf("Dir{Eval: %q}.Open(oldrun) = %v, %v; want the run at %s", d.Eval, r, err, old)
			continue
		}
		if rec, err := r.ReadRun(ctx); err != nil || rec.ID != "oldrun" {
			t.Errorf("ReadRun of the old run = %+v, %v", rec, err)
		}
	}
	if _, err := (store.Dir{Root: root}).Open(ctx, "new-1", nil); err != nil {
		t.Errorf("Open(new-1) = %v", err)
	}
	if _, err := (store.Dir{Root: root, Eval: "weather"}).Create(ctx, "oldrun", nil); err == nil || !strings.Contains(err.Error(), old) {
		t.Errorf("Create of an id an older run has = %v, want: %s already exists", err, old)
	}
	// The same id at both places, and under two evals.
	third := create(t, store.Dir{Root: root, Eval: "maps"}, "new-1")
	twice := copyOldRun(t, root, "new-1")
	_, err := (store.Dir{Root: root}).Open(ctx, "new-1", nil)
	if !errors.Is(err, store.ErrAmbiguous) {
		t.Fatalf("Open of an id at three places = %v, want ErrAmbiguous", err)
	}
	for _, p := range []string{fresh.Location(), twice, third.Location()} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the error %q does not name %s", err, p)
		}
	}
	// Given the eval, the id names one new run and the old one: still two.
	if _, err := (store.Dir{Root: root, Eval: "maps"}).Open(ctx, "new-1", nil); !errors.Is(err, store.ErrAmbiguous) {
		t.Errorf("Dir{Eval: maps}.Open(new-1) = %v, want ErrAmbiguous (ROOT/new-1 and maps' run)", err)
	}
}

// TestDirListRuns: an eval's runs folder lists its runs newest first, an
// unreadable record listed with its error, a folder that is no run left
// out; the store lists the runs of every eval and of older versions.
func TestDirListRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	d := store.Dir{Root: root, Eval: "Weather Q1"}
	day := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for id, ago := range map[string]int{"b-middle": 1, "a-newest": 0, "c-oldest": 2} {
		r, err := d.Create(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		started := day.Add(-time.Duration(ago) * time.Hour)
		if err := r.WriteRun(ctx, transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: id, Started: started}); err != nil {
			t.Fatal(err)
		}
	}
	runs := store.EvalRunsDir(root, d.Eval)
	if err := os.MkdirAll(filepath.Join(runs, "not-a-run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(runs, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, "broken", "run.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := store.ListRunDir(ctx, runs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
		if s.Location != filepath.Join(runs, s.ID) {
			t.Errorf("%s: Location %s, want %s", s.ID, s.Location, filepath.Join(runs, s.ID))
		}
		if (s.Err != nil) != (s.ID == "broken") {
			t.Errorf("%s: Err = %v", s.ID, s.Err)
		}
	}
	// The run whose record cannot be read has no start: it sorts last.
	if strings.Join(ids, " ") != "a-newest b-middle c-oldest broken" {
		t.Errorf("ListRunDir = %v, want a-newest b-middle c-oldest broken", ids)
	}
	create(t, store.Dir{Root: root, Eval: "maps"}, "m-1")
	copyOldRun(t, root, "oldrun")
	all, err := (store.Dir{Root: root}).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range all {
		have[s.ID] = true
	}
	for _, id := range []string{"a-newest", "b-middle", "c-oldest", "broken", "m-1", "oldrun"} {
		if !have[id] {
			t.Errorf("Dir.List has no %s: %v", id, all)
		}
	}
	if len(all) != 6 {
		t.Errorf("Dir.List lists %d runs, want 6", len(all))
	}
}
