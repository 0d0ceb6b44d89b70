package runnertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/runner"
)

// RunMachine checks a Machine, and so its Channel, against their
// contracts. newMachine returns a fresh machine for each check; the suite
// removes it. The machine must have sh, cat and sleep on its PATH.
//
// Beyond what runner.Channel spells out, the suite holds Exec to one
// convention: a command that exits with a non-zero code makes Exec return
// an error that errors.As finds an ExitCode() int method in, as it finds
// in *exec.ExitError, so the code survives the channel.
func RunMachine(t *testing.T, newMachine func(t *testing.T) runner.Machine) {
	machine := func(t *testing.T) runner.Machine {
		m := newMachine(t)
		t.Cleanup(func() {
			ctx := context.WithoutCancel(t.Context())
			if err := m.Remove(ctx); err != nil {
				t.Errorf("Remove = %v", err)
			}
			if err := m.Remove(ctx); err != nil {
				t.Errorf("Remove a second time = %v, want nil", err)
			}
		})
		return m
	}
	t.Run("ExecStdio", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		var stdout, stderr bytes.Buffer
		in := "line one\nline two\n"
		err := m.Exec(t.Context(), []string{"sh", "-c", "cat; echo to stderr >&2"}, strings.NewReader(in), &stdout, &stderr)
		if err != nil {
			t.Fatalf("Exec(cat) = %v", err)
		}
		if stdout.String() != in {
			t.Errorf("stdout = %q, want stdin back: %q", stdout.String(), in)
		}
		if stderr.String() != "to stderr\n" {
			t.Errorf("stderr = %q, want %q", stderr.String(), "to stderr\n")
		}
	})
	t.Run("ExecLargeOutput", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		// Four MiB through stdout, as a long transcript stream might be.
		var stdout countingWriter
		err := m.Exec(t.Context(), []string{"dd", "if=/dev/zero", "bs=65536", "count=64"}, strings.NewReader(""), &stdout, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("Exec(dd 4 MiB) = %v", err)
		}
		if stdout.n != 4<<20 {
			t.Errorf("Exec(dd 4 MiB) gave %d bytes on stdout, want %d", stdout.n, 4<<20)
		}
	})
	t.Run("ExecLargeOutputParallel", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		// Several large outputs at once, each ending as its command exits:
		// a channel that closes before the last bytes have come through
		// (kubectl exec can) loses the end of some of them.
		const n = 6
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				var stdout countingWriter
				err := m.Exec(t.Context(), []string{"dd", "if=/dev/zero", "bs=65536", "count=32"}, strings.NewReader(""), &stdout, &bytes.Buffer{})
				if err != nil {
					t.Errorf("Exec %d of %d (dd 2 MiB) = %v", i+1, n, err)
				} else if stdout.n != 2<<20 {
					t.Errorf("Exec %d of %d (dd 2 MiB) gave %d bytes on stdout, want %d", i+1, n, stdout.n, 2<<20)
				}
			})
		}
		wg.Wait()
	})
	t.Run("ExecExitCode", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		for _, code := range []int{0, 3} {
			err := m.Exec(t.Context(), []string{"sh", "-c", "exit " + strconv.Itoa(code)}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
			var coded interface{ ExitCode() int }
			switch {
			case code == 0 && err != nil:
				t.Errorf("Exec(exit 0) = %v, want nil", err)
			case code != 0 && !errors.As(err, &coded):
				t.Errorf("Exec(exit %d) = %v, want an error with an ExitCode method", code, err)
			case code != 0 && coded.ExitCode() != code:
				t.Errorf("Exec(exit %d): ExitCode() = %d", code, coded.ExitCode())
			}
		}
	})
	t.Run("ExecOpenStdin", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		// The coordinator keeps a worker's stdin open for as long as the
		// shard lasts, so Exec must return when the command exits, not
		// when its stdin ends: that is how a dead worker is noticed at
		// once. A channel that gets this wrong would hang here; once the
		// command has printed its last line and StuckAfter has passed, the
		// suite closes stdin to free it and reports the fault.
		stdin, feed := io.Pipe()
		defer feed.Close()
		printed := make(chan struct{})
		stdout := &onWrite{fn: func() { close(printed) }}
		done := make(chan error, 1)
		go func() {
			done <- m.Exec(t.Context(), []string{"sh", "-c", "echo bye"}, stdin, stdout, &bytes.Buffer{})
		}()
		var err error
		select {
		case err = <-done:
		case <-afterSignal(t.Context(), printed, StuckAfter):
			feed.Close()
			err = <-done
			t.Errorf("Exec returned only when its stdin closed, not when the command exited (%s after it printed)", StuckAfter)
		}
		if err != nil {
			t.Errorf("Exec with an open stdin = %v, want nil", err)
		}
	})
	t.Run("ExecStops", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// The command says it started, then sleeps far longer than any
		// test; the cancel must end it.
		stdout := &onWrite{fn: cancel}
		err := m.Exec(ctx, []string{"sh", "-c", "echo started; exec sleep 3600"}, strings.NewReader(""), stdout, &bytes.Buffer{})
		if err == nil {
			t.Error("Exec of a command stopped by its context = nil, want an error")
		}
		if ctx.Err() == nil {
			t.Error("Exec returned before its context ended")
		}
	})
	t.Run("CopyFolder", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		local := t.TempDir()
		want := map[string]string{
			"bundle.json":       `{"shard": 3}`,
			"a/b.txt":           "first\nsecond\n",
			"a/deeper/c.json":   "{}",
			"a/deeper/empty":    "",
			"name with spaces":  "spaces survive",
			"binary/bytes.data": "\x00\x01\xfe\xff",
		}
		writeTree(t, local, want)
		remote := path.Join(m.WorkDir(), "copied")
		if err := m.CopyTo(t.Context(), local, remote); err != nil {
			t.Fatalf("CopyTo = %v", err)
		}
		// A command on the machine sees what CopyTo put there.
		var stdout bytes.Buffer
		if err := m.Exec(t.Context(), []string{"cat", path.Join(remote, "a", "b.txt")}, strings.NewReader(""), &stdout, &bytes.Buffer{}); err != nil {
			t.Fatalf("Exec(cat) of a copied file = %v", err)
		}
		if stdout.String() != want["a/b.txt"] {
			t.Errorf("cat on the machine = %q, want %q", stdout.String(), want["a/b.txt"])
		}
		back := filepath.Join(t.TempDir(), "back")
		if err := m.CopyFrom(t.Context(), remote, back); err != nil {
			t.Fatalf("CopyFrom = %v", err)
		}
		if diff := cmp.Diff(want, readTree(t, back)); diff != "" {
			t.Errorf("folder after CopyTo and CopyFrom (-want +got):\n%s", diff)
		}
	})
	t.Run("CopyKeepsExecutable", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		local := t.TempDir()
		writeTree(t, local, map[string]string{"bin/run": "#!/bin/sh\necho ran\n", "notes.txt": "plain"})
		if err := os.Chmod(filepath.Join(local, "bin", "run"), 0o755); err != nil {
			t.Fatal(err)
		}
		remote := path.Join(m.WorkDir(), "exec")
		if err := m.CopyTo(t.Context(), local, remote); err != nil {
			t.Fatalf("CopyTo = %v", err)
		}
		var stdout bytes.Buffer
		if err := m.Exec(t.Context(), []string{path.Join(remote, "bin", "run")}, strings.NewReader(""), &stdout, &bytes.Buffer{}); err != nil || stdout.String() != "ran\n" {
			t.Errorf("running a copied executable = %q, %v; want it to run (its mode kept)", stdout.String(), err)
		}
		back := filepath.Join(t.TempDir(), "back")
		if err := m.CopyFrom(t.Context(), remote, back); err != nil {
			t.Fatalf("CopyFrom = %v", err)
		}
		for name, exec := range map[string]bool{"bin/run": true, "notes.txt": false} {
			info, err := os.Stat(filepath.Join(back, filepath.FromSlash(name)))
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm()&0o100 != 0; got != exec {
				t.Errorf("%s copied back with mode %v; want executable %t", name, info.Mode().Perm(), exec)
			}
		}
	})
	t.Run("CopyFile", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		// The worker writes a transcript; the coordinator copies that one
		// file into a folder that may not exist yet, over an older copy.
		remote := path.Join(m.WorkDir(), "results", "transcripts", "v", "c.t1.json")
		script := "mkdir -p \"$(dirname \"$1\")\" && printf '%s' \"$2\" > \"$1\""
		if err := m.Exec(t.Context(), []string{"sh", "-c", script, "sh", remote, `{"status":"answered"}`}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
			t.Fatalf("writing a file on the machine: %v", err)
		}
		local := filepath.Join(t.TempDir(), "transcripts", "v", "c.t1.json")
		if err := m.CopyFrom(t.Context(), remote, local); err != nil {
			t.Fatalf("CopyFrom(a file, into a new folder) = %v", err)
		}
		if got := readFile(t, local); got != `{"status":"answered"}` {
			t.Errorf("copied file = %q", got)
		}
		if err := os.WriteFile(local, []byte("an older, longer copy of the file"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.CopyFrom(t.Context(), remote, local); err != nil {
			t.Fatalf("CopyFrom(a file, over an older copy) = %v", err)
		}
		if got := readFile(t, local); got != `{"status":"answered"}` {
			t.Errorf("file copied over an older copy = %q", got)
		}
	})
	t.Run("CopyFromMissing", func(t *testing.T) {
		t.Parallel()
		m := machine(t)
		local := filepath.Join(t.TempDir(), "x.json")
		if err := m.CopyFrom(t.Context(), path.Join(m.WorkDir(), "no-such-file.json"), local); err == nil {
			t.Error("CopyFrom of a missing file = nil, want an error")
		}
		if _, err := os.Stat(local); err == nil {
			t.Error("CopyFrom of a missing file left a file behind")
		}
	})
}

// StuckAfter is how long ExecOpenStdin waits, after its command printed
// its only line and exited, before it calls Exec stuck. It only turns a
// hang into a clear failure; no check passes or fails on speed.
var StuckAfter = 30 * time.Second

// afterSignal returns a channel that closes d after ch closes, unless ctx
// ends first.
func afterSignal(ctx context.Context, ch <-chan struct{}, d time.Duration) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(d):
			close(out)
		case <-ctx.Done():
		}
	}()
	return out
}

// onWrite calls fn once, at the first write.
type onWrite struct {
	once sync.Once
	fn   func()
}

func (w *onWrite) Write(p []byte) (int, error) {
	w.once.Do(w.fn)
	return len(p), nil
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = readFile(t, p)
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", root, err)
	}
	return out
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countingWriter counts what is written to it.
type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
