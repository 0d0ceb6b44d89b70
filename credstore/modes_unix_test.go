//go:build unix

package credstore_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/credstore/credstoretest"
)

// TestLocalModes: the folder is 0700 and every file the store makes 0600,
// whatever the umask; a folder or key file others can reach is refused.
// It sets the process's umask, so it does not run in parallel.
func TestLocalModes(t *testing.T) {
	for _, umask := range []int{0, 0o022, 0o077} {
		old := syscall.Umask(umask)
		root := t.TempDir()
		// The folder's parents are made too, private as well.
		s, err := credstore.OpenLocal(filepath.Join(root, "config", "mst", "credentials"), filepath.Join(root, "data", "mst", "key"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := s.Put(ctx, credstoretest.NewGrant("a/b")); err != nil {
			t.Fatal(err)
		}
		if err := s.WithLock(ctx, "a/b", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		syscall.Umask(old)
		want := map[string]fs.FileMode{
			filepath.Join(root, "config"):      0o700,
			filepath.Join(root, "data", "mst"): 0o700,
			s.Dir():                            0o700,
			s.KeyFile():                        0o600,
		}
		es, err := os.ReadDir(s.Dir())
		if err != nil {
			t.Fatal(err)
		}
		exts := map[string]bool{}
		for _, e := range es {
			want[filepath.Join(s.Dir(), e.Name())] = 0o600
			exts[filepath.Ext(e.Name())] = true
		}
		if !exts[".grant"] || !exts[".lock"] || len(es) != 2 {
			t.Errorf("umask %04o: the folder holds %v; want a grant file and a lock file", umask, es)
		}
		for p, mode := range want {
			st, err := os.Stat(p)
			if err != nil {
				t.Error(err)
			} else if st.Mode().Perm() != mode {
				t.Errorf("umask %04o: %s has mode %04o, want %04o", umask, p, st.Mode().Perm(), mode)
			}
		}
	}

	// What others can reach is refused, with the command that fixes it.
	s, err := credstore.OpenLocal(filepath.Join(t.TempDir(), "credentials"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.Put(ctx, credstoretest.NewGrant("x")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode fs.FileMode
		fix  string
	}{
		{s.Dir(), 0o750, "chmod 700 " + s.Dir()},
		{s.Dir(), 0o701, "chmod 700 " + s.Dir()},
		{s.KeyFile(), 0o640, "chmod 600 " + s.KeyFile()},
		{s.KeyFile(), 0o604, "chmod 600 " + s.KeyFile()},
	} {
		if err := os.Chmod(c.path, c.mode); err != nil {
			t.Fatal(err)
		}
		_, gerr := s.Get(ctx, "x")
		perr := s.Put(ctx, credstoretest.NewGrant("y"))
		for _, err := range []error{gerr, perr} {
			if err == nil || !strings.Contains(err.Error(), c.fix) {
				t.Errorf("with %s mode %04o: %v; want an error saying %q", c.path, c.mode, err, c.fix)
			}
		}
		os.Chmod(c.path, map[bool]fs.FileMode{true: 0o700, false: 0o600}[c.path == s.Dir()])
	}
	if _, err := s.Get(ctx, "x"); err != nil {
		t.Errorf("Get with the modes put back: %v", err)
	}
}
