// Package atomicfile writes files so that a crash leaves the old file or the
// new one, never half of one: the data goes to a temporary file in the same
// folder, which is then renamed (Write) or linked (Create) into place. The
// temporary file's name starts with ".tmp-", holds at most the first 64
// bytes of the file's name (so a file whose name is as long as the file
// system allows still gets a temporary file) and ends with a random suffix
// of digits.
//
// Both are durable: the temporary file is synced before it is put in place,
// and the folder after, so once Write or Create returns the file survives a
// power cut whole; folders they had to make are synced into their parents.
// Append adds to a file and syncs it.
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Write writes data to path, replacing any file there, creating the folder
// when needed. The file gets mode 0644.
func Write(path string, data []byte) error {
	return WriteFrom(path, bytes.NewReader(data), 0o644)
}

// WriteFrom writes what r holds to path, replacing any file there, creating
// the folder when needed, with mode perm. Nothing is held in memory whole.
func WriteFrom(path string, r io.Reader, perm fs.FileMode) error {
	tmp, err := temp(path, r, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Create writes data to path only when no file is there: it fails with an
// error wrapping fs.ErrExist otherwise, and of two concurrent Creates of
// one path exactly one succeeds.
func Create(path string, data []byte) error {
	tmp, err := temp(path, bytes.NewReader(data), 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if le, ok := err.(*os.LinkError); ok {
			return fmt.Errorf("writing %s: %w", path, le.Err)
		}
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Append adds data at the end of the file at path (made when missing, with
// mode 0644) and syncs it. It does not repair a torn last line: callers
// that write lines do.
func Append(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	return nil
}

// syncFile and syncDir are variables so a test can see the syncs happen,
// in order with the renames.
var (
	syncFile = (*os.File).Sync
	syncDir  = func(dir string) error {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		return err
	}
)

// mkdirAll makes dir and its missing parents, syncing each parent that got
// a new folder, so the folders survive a power cut too.
func mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
				return nil // made by someone else meanwhile
			}
		}
		return err
	}
	return syncDir(parent)
}

// temp writes r to a new temporary file beside path, with mode perm, and
// returns its name.
func temp(path string, r io.Reader, perm fs.FileMode) (string, error) {
	dir := filepath.Dir(path)
	if err := mkdirAll(dir); err != nil {
		return "", err
	}
	base := filepath.Base(path)
	if len(base) > 64 {
		n := 64
		for n > 0 && !utf8.RuneStart(base[n]) {
			n-- // cut between characters: some file systems want UTF-8 names
		}
		base = base[:n]
	}
	f, err := os.CreateTemp(dir, ".tmp-"+base+"-*")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Name(), nil
}
