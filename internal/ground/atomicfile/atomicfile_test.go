package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// temps returns the temporary files left in dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkFile fails t unless path holds want, with mode 0644, and no
// temporary file is left beside it.
func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s = %.40q, %v; want %.40q", path, got, err, want)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm() != 0o644 {
		t.Errorf("%s: mode %v, want 0644", path, st.Mode().Perm())
	}
	if left := temps(t, filepath.Dir(path)); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new", "folder", "run.json")
	if err := Write(path, []byte("one")); err != nil {
		t.Fatalf("Write(new file in new folders) = %v", err)
	}
	checkFile(t, path, []byte("one"))
	if err := Write(path, []byte("two, longer")); err != nil {
		t.Fatalf("Write(existing file) = %v", err)
	}
	checkFile(t, path, []byte("two, longer"))
	if err := Write(path, nil); err != nil {
		t.Fatalf("Write(empty) = %v", err)
	}
	checkFile(t, path, nil)
}

func TestCreate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v", "c.t1.json")
	if err := Create(path, []byte("first")); err != nil {
		t.Fatalf("Create(new file) = %v", err)
	}
	checkFile(t, path, []byte("first"))
	if err := Create(path, []byte("second")); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("Create(existing file) = %v, want fs.ErrExist naming the file", err)
	}
	checkFile(t, path, []byte("first"))
	// Write still replaces what Create made.
	if err := Write(path, []byte("third")); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, []byte("third"))
}

// TestCreateConcurrent has many Creates of one file race: one wins, the
// others get fs.ErrExist, and the file is the winner's, whole.
func TestCreateConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.t1.json")
	const n = 32
	data := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprint(i, ";")), 50000) }
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = Create(path, data(i)) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("Create by %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, fs.ErrExist):
			t.Errorf("Create by %d = %v, want nil or fs.ErrExist", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%d Creates: none succeeded", n)
	}
	checkFile(t, path, data(winner))
}

// TestWriteConcurrent has writers replace a file while readers read it:
// every read is one whole write.
func TestWriteConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.json")
	data := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 100000+i) }
	if err := Write(path, data(0)); err != nil {
		t.Fatal(err)
	}
	var wg, rwg sync.WaitGroup
	done := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				if err := Write(path, data(1+(w*10+i)%25)); err != nil {
					t.Errorf("Write = %v", err)
				}
			}
		})
	}
	rwg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("ReadFile while writing = %v", err)
				return
			}
			if len(b) < 100000 || !bytes.Equal(b, data(len(b)-100000)) {
				t.Errorf("ReadFile while writing = %d bytes not of one write", len(b))
				return
			}
		}
	})
	wg.Wait()
	close(done)
	rwg.Wait()
	if left := temps(t, filepath.Dir(path)); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestFailuresLeaveNoTemp: a write that fails leaves no temporary file.
func TestFailuresLeaveNoTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The path is a folder that holds a file: the rename fails.
	folder := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(folder, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(folder, []byte("x")); err == nil {
		t.Errorf("Write over a folder = nil error")
	}
	if err := Create(folder, []byte("x")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over a folder = %v, want fs.ErrExist", err)
	}
	// The folder cannot be made: a file is in the way.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(file, "sub", "a.json"), []byte("x")); err == nil {
		t.Errorf("Write under a file = nil error")
	}
	if err := Create(filepath.Join(file, "a.json"), []byte("x")); err == nil {
		t.Errorf("Create under a file = nil error")
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestLongNames: a file whose name is as long as file systems allow can
// be written: its temporary file's name is shorter.
func TestLongNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{strings.Repeat("x", 255), strings.Repeat("ü", 127), "ab" + strings.Repeat("東", 84)} {
		path := filepath.Join(dir, name)
		if err := Write(path, []byte("w")); err != nil {
			t.Errorf("Write(%d-byte name) = %v", len(name), err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := Create(path, []byte("c")); err != nil {
			t.Errorf("Create(%d-byte name) = %v", len(name), err)
		}
		checkFile(t, path, []byte("c"))

		tmp, err := temp(path, strings.NewReader(""), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(tmp)
		if base := filepath.Base(tmp); len(base) > 100 || !utf8.ValidString(base) || !strings.HasPrefix(base, ".tmp-") {
			t.Errorf("temporary file of a %d-byte name = %q, want a short UTF-8 name starting .tmp-", len(name), base)
		}
	}
}
