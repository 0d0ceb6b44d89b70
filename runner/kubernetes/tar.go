package kubernetes

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// writeTar writes the folder localDir to w as a tar stream in which the
// folder is the entry prefix/ and each thing under it keeps its relative
// name below prefix (slash-separated, no leading slash). No entry is
// written for the folders above prefix, so extracting the stream at the
// root leaves the owner and mode of existing folders alone.
func writeTar(w io.Writer, localDir, prefix string) error {
	tw := tar.NewWriter(w)
	walk := func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(localDir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		target := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return err
		}
		hdr.Name = path.Join(prefix, filepath.ToSlash(rel))
		if info.IsDir() {
			hdr.Name += "/"
		}
		// The pod's user owns what it extracts; local owners mean nothing
		// there.
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	}
	if err := filepath.WalkDir(localDir, walk); err != nil {
		return fmt.Errorf("packing %s: %w", localDir, err)
	}
	return tw.Close()
}

// readTar extracts to localPath the stream `tar -c -C DIR BASE` writes:
// its first entry is BASE (a file, or a folder followed by what it holds)
// and becomes localPath. Folders and regular files are extracted, links
// and devices skipped. An entry outside BASE, or whose name climbs out of
// it, is an error. Each file is written under a temporary name and renamed
// over any older copy.
func readTar(r io.Reader, localPath string) error {
	tr := tar.NewReader(r)
	root, seen := "", false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		if !seen {
			root, seen = name, true
		}
		rest, ok := strings.CutPrefix(name, root)
		if !ok || (rest != "" && rest[0] != '/') {
			return fmt.Errorf("the copy holds %q, which is outside %q", hdr.Name, root)
		}
		rest = strings.TrimPrefix(rest, "/")
		target := localPath
		if rest != "" {
			if !filepath.IsLocal(filepath.FromSlash(rest)) {
				return fmt.Errorf("the copy holds %q, which climbs out of its folder", hdr.Name)
			}
			target = filepath.Join(localPath, filepath.FromSlash(rest))
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFileAtomic(target, tr, hdr.FileInfo().Mode().Perm()); err != nil {
				return err
			}
		}
	}
	if !seen {
		return errors.New("the copy is empty")
	}
	return nil
}

// writeFileAtomic writes r to name through a temporary file in the same
// folder, making the folder when it is missing.
func writeFileAtomic(name string, r io.Reader, perm fs.FileMode) error {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-copy-*")
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
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
