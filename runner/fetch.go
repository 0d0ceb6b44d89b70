package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
)

// A worker is not trusted with the coordinator's files: what it names for
// fetching, and what it leaves in its results folder, must not make the
// coordinator read or write anywhere else. The path it names must stay
// inside its results (checkFetchPath); a worker on this machine (the
// processes runner) is copied from through an os.Root of its folder, with
// every symbolic link refused (copyOut); and what lands in the fetch
// folder is read only when it is a regular file (readFetched).

// maxFetchBytes bounds one fetched file: a transcript is far smaller.
const maxFetchBytes = 256 << 20

// checkFetchPath refuses a path, as a worker's message names it (relative
// to its results folder, with slashes), that could leave that folder.
func checkFetchPath(p string) error {
	if p == "" || strings.Contains(p, `\`) || strings.ContainsRune(p, 0) || !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("refused to fetch %q: the path is not inside the worker's results folder", p)
	}
	return nil
}

// readFetched reads the file a copy from a machine left at local, which
// must be a regular file there, not a link, a folder or a device.
func readFetched(local string) ([]byte, error) {
	st, err := os.Lstat(local)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the fetched copy is %s, not a regular file", kind(st.Mode()))
	}
	f, err := os.OpenFile(local, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fst, err := f.Stat(); err != nil || !os.SameFile(st, fst) {
		return nil, errors.New("the fetched copy changed while it was read")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFetchBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFetchBytes {
		return nil, fmt.Errorf("the fetched file is larger than %d MiB, the most MST fetches", maxFetchBytes>>20)
	}
	return b, nil
}

// copyOut copies the file or folder src, which must be inside the folder
// dir, to dst. Everything is read through an os.Root of dir, so nothing
// outside it can be read; a symbolic link anywhere (a folder on the way
// to src, src itself, or an entry inside a copied folder) is refused, as
// are devices, pipes and sockets. A file is checked to be the one looked
// at before it is read, so swapping in a link mid-way is refused too.
// Files are written under a temporary name and renamed into place.
func copyOut(dir, src, dst string) error {
	rel, err := filepath.Rel(dir, src)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("refused to copy %s: it is not inside the machine's folder %s", src, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	parts := strings.Split(rel, string(filepath.Separator))
	for i := range parts[:len(parts)-1] {
		at := filepath.Join(parts[:i+1]...)
		st, err := root.Lstat(at)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("refused to copy %s: %s is %s, not a folder", src, filepath.Join(dir, at), kind(st.Mode()))
		}
	}
	return copyOutEntry(root, dir, rel, dst)
}

func copyOutEntry(root *os.Root, dir, rel, dst string) error {
	st, err := root.Lstat(rel)
	if err != nil {
		return err
	}
	switch {
	case st.IsDir():
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		f, err := root.Open(rel)
		if err != nil {
			return err
		}
		fst, err := f.Stat()
		if err != nil || !os.SameFile(st, fst) {
			f.Close()
			return fmt.Errorf("refused to copy %s: it changed while it was copied", filepath.Join(dir, rel))
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyOutEntry(root, dir, filepath.Join(rel, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case st.Mode().IsRegular():
		f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fst, err := f.Stat()
		if err != nil || !os.SameFile(st, fst) {
			return fmt.Errorf("refused to copy %s: it changed while it was copied", filepath.Join(dir, rel))
		}
		if err := atomicfile.WriteFrom(dst, f, st.Mode().Perm()); err != nil {
			return fmt.Errorf("copying %s: %w", filepath.Join(dir, rel), err)
		}
		return nil
	}
	return fmt.Errorf("refused to copy %s: it is %s; only files and folders are copied", filepath.Join(dir, rel), kind(st.Mode()))
}

// kind words a file's type for a message.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a folder"
	case m.IsRegular():
		return "a file"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}
