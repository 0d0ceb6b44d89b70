package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serverMachine is a machine whose Exec runs serve-files in this process
// (or fails, when broken), and whose CopyFrom counts its calls.
type serverMachine struct {
	Machine
	dir    string
	broken bool
	copies int
}

func (m *serverMachine) MST() []string { return []string{"mst"} }

func (m *serverMachine) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if m.broken {
		return errors.New("no such command")
	}
	if len(argv) != 4 || argv[1] != "runner" || argv[2] != "serve-files" {
		return errors.New("unexpected command")
	}
	done := make(chan error, 1)
	go func() { done <- serveFiles(argv[3], stdin, stdout) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *serverMachine) CopyFrom(ctx context.Context, remote, local string) error {
	m.copies++
	return copyOut(m.dir, remote, local)
}

func TestFileServer(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "transcripts", "v"), 0o755)
	big := bytes.Repeat([]byte("ü🦉"), 200_000)
	os.WriteFile(filepath.Join(dir, "transcripts", "v", "a.json"), []byte(`{"a":1}`), 0o644)
	os.WriteFile(filepath.Join(dir, "transcripts", "v", "big.json"), big, 0o644)
	os.WriteFile(filepath.Join(dir, "empty.json"), nil, 0o644)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("not yours"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link.json"))
	m := &serverMachine{dir: dir}
	c := &fileClient{m: m, root: dir, execCtx: context.Background(), stderr: io.Discard}
	defer c.close()
	ctx := context.Background()
	for p, want := range map[string][]byte{"transcripts/v/a.json": []byte(`{"a":1}`), "transcripts/v/big.json": big, "empty.json": {}} {
		b, ok, err := c.fetch(ctx, p)
		if !ok || err != nil || !bytes.Equal(b, want) {
			t.Errorf("fetch %s = %d bytes, served %v, %v; want %d bytes", p, len(b), ok, err, len(want))
		}
	}
	for p, msg := range map[string]string{
		"nope.json":   "does not exist",
		"link.json":   "escapes",
		"transcripts": "not a regular file",
		"../secret":   "not inside the worker's results folder",
		"/etc/passwd": "not inside the worker's results folder",
	} {
		_, ok, err := c.fetch(ctx, p)
		if !ok || err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("fetch %s = served %v, %v; want an error saying %q", p, ok, err, msg)
		}
	}
	if _, _, err := c.fetch(ctx, "nope.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file's error is not ErrNotExist: %v", err)
	}
	// After every error, the stream still serves.
	if b, ok, err := c.fetch(ctx, "transcripts/v/a.json"); !ok || err != nil || string(b) != `{"a":1}` {
		t.Errorf("fetch after errors = %q, %v, %v", b, ok, err)
	}
	if m.copies != 0 {
		t.Errorf("%d copies went through CopyFrom while the server served", m.copies)
	}
}

// TestFileServerGone: a machine whose file server cannot start (or dies)
// is copied from with CopyFrom instead, through MachineRunner's fetch.
func TestFileServerGone(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.json"), []byte("x"), 0o644)
	m := &serverMachine{dir: dir, broken: true}
	c := &fileClient{m: m, root: dir, execCtx: context.Background(), stderr: io.Discard}
	defer c.close()
	if _, ok, _ := c.fetch(context.Background(), "a.json"); ok {
		t.Fatal("a broken server served")
	}
	if _, ok, _ := c.fetch(context.Background(), "a.json"); ok {
		t.Fatal("a broken server served the second time")
	}
}

// TestFileServerCancel: a fetch whose context has ended asks nothing, and
// the stream goes on serving.
func TestFileServerCancel(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.json"), []byte("x"), 0o644)
	c := &fileClient{m: &serverMachine{dir: dir}, root: dir, execCtx: context.Background(), stderr: io.Discard}
	defer c.close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok, err := c.fetch(ctx, "a.json"); ok && err == nil {
		t.Fatal("a cancelled fetch succeeded")
	}
	if b, ok, err := c.fetch(context.Background(), "a.json"); !ok || err != nil || string(b) != "x" {
		t.Fatalf("after a cancelled fetch: %q, %v, %v", b, ok, err)
	}
}
