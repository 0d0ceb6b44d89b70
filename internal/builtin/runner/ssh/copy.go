package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/mst-eval/mst/runner"
)

// tarTo copies the local folder localDir to remoteDir on r: a tar stream
// written here (runner.WriteTar) streams into `tar -x` there.
func tarTo(ctx context.Context, r remote, localDir, remoteDir string) error {
	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		err := runner.WriteTar(pw, localDir, ".")
		pw.CloseWithError(err)
		writeErr <- err
	}()
	var stderr bytes.Buffer
	cmd := "mkdir -p " + quote(remoteDir) + " && tar -x -f - -C " + quote(remoteDir)
	err := r.run(ctx, cmd, pr, nil, &limited{buf: &stderr, n: 4096})
	pr.CloseWithError(io.ErrClosedPipe)
	if werr := <-writeErr; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return fmt.Errorf("copying %s to %s: %w", localDir, r.name(), werr)
	}
	if err != nil {
		return fmt.Errorf("copying %s to %s:%s: %w%s", localDir, r.name(), remoteDir, err, stderrNote(&stderr))
	}
	return nil
}

// tarFrom copies remotePath, a file or a folder, from r to localPath: `tar
// -c` there streams into runner.ReadTar here, which writes each file under
// a temporary name and renames it into place, so a reader never sees half
// of it and a failed copy leaves the older copy.
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
	xerr := runner.ReadTar(pr, localPath)
	// Drain what is left, so the command can end.
	io.Copy(io.Discard, pr)
	if err := <-runErr; err != nil {
		return fmt.Errorf("copying %s:%s: %w%s", r.name(), remotePath, err, stderrNote(&stderr))
	}
	if xerr != nil {
		return fmt.Errorf("copying %s:%s to %s: %w", r.name(), remotePath, localPath, xerr)
	}
	return nil
}

// stderrNote is ": " and what a command printed on stderr, or "".
func stderrNote(b *bytes.Buffer) string {
	if s := strings.TrimSpace(b.String()); s != "" {
		return ": " + s
	}
	return ""
}
