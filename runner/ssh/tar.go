package ssh

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// tarTo copies the local folder localDir to remoteDir on r: a tar archive
// written here streams into `tar -x` there. Folders and regular files are
// copied with their permissions; other kinds of file are skipped.
func tarTo(ctx context.Context, r remote, localDir, remoteDir string) error {
	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		err := writeTar(pw, localDir)
		pw.CloseWithError(err)
		writeErr <- err
	}()
	var stderr bytes.Buffer
	cmd := "mkdir -p " + quote(remoteDir) + " && tar -x -f - -C " + quote(remoteDir)
	err := r.run(ctx, cmd, pr, nil, &limited{buf: &stderr, n: 4096})
	pr.Close()
	if werr := <-writeErr; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return fmt.Errorf("copying %s to %s: %w", localDir, r.name(), werr)
	}
	if err != nil {
		return fmt.Errorf("copying %s to %s:%s: %w%s", localDir, r.name(), remoteDir, err, stderrNote(&stderr))
	}
	return nil
}

// writeTar writes the tree under dir to w as a tar archive with names
// relative to dir.
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()})
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(info.Mode().Perm()), Size: info.Size(), ModTime: info.ModTime()}); err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// tarFrom copies remotePath, a file or a folder, from r to localPath: `tar
// -c` there streams into an extraction here. Each file is written under a
// temporary name and renamed into place, so a reader never sees half of
// it and a failed copy leaves the older copy.
func tarFrom(ctx context.Context, r remote, remotePath, localPath string) error {
	dir, base := path.Split(path.Clean(remotePath))
	if dir == "" {
		dir = "."
	}
	pr, pw := io.Pipe()
	runErr := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		err := r.run(ctx, "tar -c -f - -C "+quote(dir)+" "+quote(base), nil, pw, &limited{buf: &stderr, n: 4096})
		pw.Close()
		runErr <- err
	}()
	xerr := extractTar(pr, base, localPath)
	// Drain what is left, so the command can end.
	io.Copy(io.Discard, pr)
	err := <-runErr
	if err != nil {
		return fmt.Errorf("copying %s:%s: %w%s", r.name(), remotePath, err, stderrNote(&stderr))
	}
	if xerr != nil {
		return fmt.Errorf("copying %s:%s to %s: %w", r.name(), remotePath, localPath, xerr)
	}
	return nil
}

// extractTar writes the archive's entry base to localPath, and the entries
// under base/ under it.
func extractTar(rd io.Reader, base, localPath string) error {
	tr := tar.NewReader(rd)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(path.Clean(h.Name), "/")
		var rel string
		switch {
		case name == base:
		case strings.HasPrefix(name, base+"/"):
			rel = name[len(base)+1:]
		default:
			return fmt.Errorf("unexpected entry %q in the archive", h.Name)
		}
		if rel != "" && !filepath.IsLocal(filepath.FromSlash(rel)) {
			return fmt.Errorf("entry %q leaves the copied folder", h.Name)
		}
		target := filepath.Join(localPath, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(target, tr, fs.FileMode(h.Mode).Perm()); err != nil {
				return err
			}
		}
	}
}

// writeFile writes r to p through a temporary file in the same folder.
func writeFile(p string, r io.Reader, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-copy-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), perm)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// stderrNote is ": " and what a command printed on stderr, or "".
func stderrNote(b *bytes.Buffer) string {
	if s := strings.TrimSpace(b.String()); s != "" {
		return ": " + s
	}
	return ""
}
