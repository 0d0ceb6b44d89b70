package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDurable: every way of writing syncs the data before the file is put
// in place, then syncs the folder that now names it, and syncs the parent
// of every folder it made. (Not parallel: it swaps the package's sync
// functions.)
func TestDurable(t *testing.T) {
	root := t.TempDir()
	type event struct{ kind, path string }
	var events []event
	oldFile, oldDir := syncFile, syncDir
	t.Cleanup(func() { syncFile, syncDir = oldFile, oldDir })
	var target string
	var want []byte
	syncFile = func(f *os.File) error {
		// The data is synced while the final name does not hold it yet.
		if b, err := os.ReadFile(target); err == nil && bytes.Equal(b, want) && !strings.HasSuffix(f.Name(), filepath.Base(target)) {
			t.Errorf("%s synced after %s already held the new data", f.Name(), target)
		}
		events = append(events, event{"file", f.Name()})
		return oldFile(f)
	}
	syncDir = func(dir string) error {
		events = append(events, event{"dir", dir})
		return oldDir(dir)
	}
	check := func(name string, write func() error, wantDirs ...string) {
		t.Helper()
		events = nil
		if err := write(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var files, dirs []string
		for _, e := range events {
			if e.kind == "file" {
				files = append(files, e.path)
			} else {
				dirs = append(dirs, e.path)
			}
		}
		if len(files) != 1 {
			t.Errorf("%s: files synced %v, want one", name, files)
		}
		if last := events[len(events)-1]; last.kind != "dir" || last.path != filepath.Dir(target) {
			t.Errorf("%s: last sync %v, want the folder %s once the file is in place", name, last, filepath.Dir(target))
		}
		for _, d := range wantDirs {
			found := false
			for _, got := range dirs {
				found = found || got == d
			}
			if !found {
				t.Errorf("%s: folders synced %v, want %s among them (it got a new folder)", name, dirs, d)
			}
		}
	}
	target, want = filepath.Join(root, "a", "b", "run.json"), []byte("one")
	check("Write into new folders", func() error { return Write(target, want) }, root, filepath.Join(root, "a"))
	want = []byte("two")
	check("Write over a file", func() error { return Write(target, want) })
	target, want = filepath.Join(root, "a", "c", "t.json"), []byte("three")
	check("Create", func() error { return Create(target, want) }, filepath.Join(root, "a"))
	target, want = filepath.Join(root, "a", "grades.jsonl"), []byte("line\n")
	events = nil
	if err := Append(target, want); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].kind != "file" {
		t.Errorf("Append: syncs %v, want the file synced", events)
	}
	if err := Append(target, want); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "line\nline\n" {
		t.Errorf("after two Appends the file holds %q", b)
	}
}
