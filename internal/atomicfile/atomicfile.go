// Package atomicfile writes files so that a crash leaves the old file or the
// new one, never half of one: the data goes to a temporary file in the same
// folder, which is then renamed (Write) or linked (Create) into place. The
// temporary file's name starts with ".tmp-", holds at most the first 64
// bytes of the file's name (so a file whose name is as long as the file
// system allows still gets a temporary file) and ends with a random suffix
// of digits.
//
// Neither syncs: a power cut may lose the last writes, but never tears one.
package atomicfile

import (
	"bytes"
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
	return nil
}

// temp writes r to a new temporary file beside path, with mode perm, and
// returns its name.
func temp(path string, r io.Reader, perm fs.FileMode) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
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
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), perm)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Name(), nil
}
