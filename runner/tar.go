package runner

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

	"github.com/mst-eval/mst/internal/ground/atomicfile"
)

// WriteTar writes the folder localDir as a tar stream whose entries sit
// under prefix (a slash-separated path with no leading slash): the folder
// itself is the entry prefix/, a file a/b.txt in it is prefix/a/b.txt. The
// folders above prefix get no entry, so extracting the stream never changes
// the owner or mode of a folder that exists already.
func WriteTar(w io.Writer, localDir, prefix string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(localDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(localDir, p)
		if err != nil {
			return err
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = name
		if info.IsDir() {
			hdr.Name += "/"
		}
		// Ownership is the container's business: docker cp gives every
		// entry to the container's root user.
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
	})
	if err != nil {
		return fmt.Errorf("packing %s: %w", localDir, err)
	}
	return tw.Close()
}

// ReadTar extracts a tar stream as `docker cp CONTAINER:PATH -` and `tar -c -C DIR BASE` write it, to
// localPath: the stream's first entry is PATH's last element (a file, or a
// folder followed by its contents), and it becomes localPath. Regular files
// and folders are extracted; links and devices are skipped. An entry whose
// name would leave localPath is an error. Files are written under a
// temporary name and renamed into place, over any older copy.
func ReadTar(r io.Reader, localPath string) error {
	tr := tar.NewReader(r)
	root := ""
	seen := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if !seen {
			root, seen = name, true
		}
		rel, ok := strings.CutPrefix(name, root)
		if !ok || (rel != "" && rel[0] != '/') {
			return fmt.Errorf("the copy holds %q, outside %q", hdr.Name, root)
		}
		rel = strings.TrimPrefix(rel, "/")
		target := localPath
		if rel != "" {
			if !filepath.IsLocal(filepath.FromSlash(rel)) {
				return fmt.Errorf("the copy holds %q, which leaves its folder", hdr.Name)
			}
			target = filepath.Join(localPath, filepath.FromSlash(rel))
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

// writeFileAtomic writes r to path through a temporary file in the same
// folder, making the folder when it is missing.
func writeFileAtomic(path string, r io.Reader, perm fs.FileMode) error {
	return atomicfile.WriteFrom(path, r, perm)
}
