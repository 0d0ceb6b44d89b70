package ssh_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	sshrunner "github.com/mst-eval/mst/internal/builtin/runner/ssh"
	"github.com/mst-eval/mst/internal/testkit/sshtest"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
)

// testVersion is the version the mst built for these tests reports.
const testVersion = "0.0.0-sshtest"

func TestMain(m *testing.M) {
	// The conformance suite starts this test binary again, on the host, as
	// its MCP server: loopback hosts share this file system.
	runnertest.Serve()
	code := m.Run()
	testbin.Clean()
	os.Exit(code)
}

// mstBinary builds ./cmd/mst once, stamped with testVersion, and returns
// its path.
func mstBinary(t *testing.T) string {
	t.Helper()
	dir, err := testbin.Build(testbin.Options{Version: testVersion}, testbin.MST)
	if err != nil {
		t.Fatal(err)
	}
	return testbin.Path(dir, testbin.MST)
}

// startHost starts an sshd for the test and, when the test ends, checks
// that nothing its sessions started is still running.
func startHost(t *testing.T, o sshtest.Options) *sshtest.Host {
	t.Helper()
	h := sshtest.Start(t, o)
	t.Cleanup(func() { checkIdle(t, h) })
	return h
}

// checkIdle waits up to 20 seconds for the host's sessions to end.
func checkIdle(t *testing.T, h *sshtest.Host) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(h.Sessions()) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("processes still running on %s after the test: %v", h.Addr, h.Sessions())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// options are the runner options that reach h with its keys.
func options(h *sshtest.Host, extra ...string) map[string]string {
	o := map[string]string{"hosts": h.Target(), "identity": h.Keys.Identity, "knownHosts": h.Keys.KnownHosts}
	for i := 0; i+1 < len(extra); i += 2 {
		o[extra[i]] = extra[i+1]
	}
	return o
}

func newRunner(t *testing.T, o map[string]string) (runner.Runner, error) {
	return sshrunner.Definition().New(t.Context(), runner.Params{Options: o, MST: []string{mstBinary(t)}, Keep: runner.KeepNever})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p runner.Params) (runner.Runner, error) {
			p.MST = []string{mstBinary(t)}
			for k, v := range options(h) {
				p.Options[k] = v
			}
			return sshrunner.Definition().New(t.Context(), p)
		},
		MSTVersion: testVersion,
		Shards:     3,
	})
}

func TestMachine(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	var n int
	var mu sync.Mutex
	runnertest.RunMachine(t, func(t *testing.T) runner.Machine {
		r, err := newRunner(t, options(h))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		m, err := sshrunner.CreateMachine(t.Context(), r, "machine-test", i)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// TestCopiesItself checks where mst lands on a host: once per build, under
// ~/.cache/mst/bin, and run from there.
func TestCopiesItself(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	for range 2 {
		r, err := newRunner(t, options(h))
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		r.Close()
	}
	matches, _ := filepath.Glob(filepath.Join(h.Home, ".cache", "mst", "bin", "*", "mst"))
	if len(matches) != 1 || !strings.Contains(matches[0], testVersion+"-"+runtime.GOOS+"-"+runtime.GOARCH+"-") {
		t.Fatalf("mst on the host: %v, want one copy in ~/.cache/mst/bin/%s-%s-%s-HASH/mst", matches, testVersion, runtime.GOOS, runtime.GOARCH)
	}
	r, err := newRunner(t, options(h))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := sshrunner.CreateMachine(t.Context(), r, "copies-itself", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Remove(context.WithoutCancel(t.Context()))
	if got := m.MST(); len(got) != 1 || got[0] != matches[0] {
		t.Errorf("MST() = %v, want [%s]", got, matches[0])
	}
	if want := path.Join(h.Home, ".cache", "mst", "work", "copies-itself-shard-0"); m.WorkDir() != want {
		t.Errorf("WorkDir() = %s, want %s", m.WorkDir(), want)
	}
}

func TestUnknownHostKey(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{NoKnownHosts: true})
	_, err := newRunner(t, options(h))
	_, port, _ := strings.Cut(h.Addr, ":")
	fix := "ssh-keyscan -p " + port + " 127.0.0.1 >> " + h.Keys.KnownHosts
	if err == nil || !strings.Contains(err.Error(), "is not in "+h.Keys.KnownHosts) || !strings.Contains(err.Error(), fix) {
		t.Fatalf("New with a host missing from known_hosts = %v\nwant it refused, naming the file and the fix %q", err, fix)
	}
	// Turned off explicitly, the check lets the host in.
	r, err := newRunner(t, options(h, "strictHostKeyChecking", "false"))
	if err != nil {
		t.Fatalf("New with strictHostKeyChecking=false = %v", err)
	}
	r.Close()
}

func TestChangedHostKey(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{NoKnownHosts: true})
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewPublicKey(pub)
	line := knownhosts.Line([]string{knownhosts.Normalize(h.Addr)}, other) + "\n"
	if err := os.WriteFile(h.Keys.KnownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, strict := range []string{"true", "false"} {
		_, err := newRunner(t, options(h, "strictHostKeyChecking", strict))
		if err == nil || !strings.Contains(err.Error(), "changed") || !strings.Contains(err.Error(), "ssh-keygen -R") {
			t.Errorf("New (strict %s) with another key in known_hosts = %v, want it refused as changed, with the fix", strict, err)
		}
	}
}

func TestMissingKnownHostsFile(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := newRunner(t, options(h, "knownHosts", missing))
	if err == nil || !strings.Contains(err.Error(), missing+" does not exist") || !strings.Contains(err.Error(), "ssh-keyscan") {
		t.Errorf("New with a missing known_hosts file = %v, want it named with the fix", err)
	}
}

func TestWrongKey(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	other, err := sshtest.NewKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = newRunner(t, options(h, "identity", other.Identity))
	if err == nil || !strings.Contains(err.Error(), "authorized_keys") {
		t.Errorf("New with a key the host does not accept = %v, want a login failure that points at authorized_keys", err)
	}
}

func TestPassphraseKey(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret words"))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "id_ed25519")
	os.WriteFile(key, pemEncode(block.Type, block.Bytes), 0o600)
	known := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(known, nil, 0o600)
	_, err = newRunner(t, map[string]string{"hosts": "nobody@127.0.0.1:1", "identity": key, "knownHosts": known})
	if err == nil || !strings.Contains(err.Error(), "ssh-add "+key) {
		t.Errorf("New with a passphrase key = %v, want it to say ssh-add %s", err, key)
	}
}

// TestOtherVersion gives the mst option a program that reports another
// version: the run is refused before it starts.
func TestOtherVersion(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	old := filepath.Join(t.TempDir(), "mst-old")
	os.WriteFile(old, []byte("#!/bin/sh\necho 'mst 0.0.1'\n"), 0o755)
	_, err := newRunner(t, options(h, "mst", old))
	if err == nil || !strings.Contains(err.Error(), `"mst 0.0.1"`) || !strings.Contains(err.Error(), `"mst `+testVersion+`"`) {
		t.Fatalf("New with mst=%s (another version) = %v, want it refused naming both versions", old, err)
	}
	// The same version at a given path is taken as it is.
	r, err := newRunner(t, options(h, "mst", mstBinary(t)))
	if err != nil {
		t.Fatalf("New with mst=PATH of this version = %v", err)
	}
	defer r.Close()
	m, err := sshrunner.CreateMachine(t.Context(), r, "given-mst", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Remove(context.WithoutCancel(t.Context()))
	if got := m.MST(); len(got) != 1 || got[0] != mstBinary(t) {
		t.Errorf("MST() = %v, want the given path", got)
	}
	if _, err := os.Stat(filepath.Join(h.Home, ".cache", "mst", "bin")); err == nil {
		t.Error("MST copied itself although mst=PATH was given")
	}
}

// TestOtherPlatform runs the host's sessions with a uname that reports
// another architecture: MST refuses to copy itself there and says what to
// do instead.
func TestOtherPlatform(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	arch, goarch := "aarch64", "arm64"
	if runtime.GOARCH == "arm64" {
		arch, goarch = "x86_64", "amd64"
	}
	os.WriteFile(filepath.Join(bin, "uname"), []byte("#!/bin/sh\necho 'Linux "+arch+"'\n"), 0o755)
	h := startHost(t, sshtest.Options{Env: map[string]string{"PATH": bin + ":/usr/local/bin:/usr/bin:/bin"}})
	_, err := newRunner(t, options(h))
	want := "host " + h.Target() + " is linux/" + goarch + "; this mst is " + runtime.GOOS + "/" + runtime.GOARCH + ": install mst " + testVersion + " there and pass --runner-option mst=PATH"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New on a host of another architecture = %v\nwant %q", err, want)
	}
}

// hostMachine starts a host and makes a machine named name on it; the
// runner closes when the test ends.
func hostMachine(t *testing.T, name string) (*sshtest.Host, runner.Machine) {
	t.Helper()
	h := startHost(t, sshtest.Options{})
	r, err := newRunner(t, options(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	m, err := sshrunner.CreateMachine(t.Context(), r, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h, m
}

// TestDroppedConnection cuts the connection under a running command: Exec
// ends with an error, the command on the host ends too, and Remove logs in
// again to delete the work folder.
func TestDroppedConnection(t *testing.T) {
	t.Parallel()
	h, m := hostMachine(t, "dropped")
	stdin, stdinW := io.Pipe()
	defer stdinW.Close()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- m.Exec(t.Context(), []string{"sh", "-c", "echo started; exec cat"}, stdin, &signalWriter{c: started}, &bytes.Buffer{})
	}()
	<-started
	if n, err := h.Drop(); n == 0 || err != nil {
		t.Fatalf("Drop() = %d, %v", n, err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("Exec over a dropped connection = nil, want an error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exec did not return after the connection dropped")
	}
	if err := m.Remove(t.Context()); err != nil {
		t.Fatalf("Remove after the drop = %v", err)
	}
	if _, err := os.Stat(m.WorkDir()); !os.IsNotExist(err) {
		t.Errorf("the work folder %s is still there after Remove (%v)", m.WorkDir(), err)
	}
}

// TestLeftovers keeps a machine, finds it with Leftovers and deletes it
// with Remove.
func TestLeftovers(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	o := options(h)
	r, err := newRunner(t, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, run := range []string{"run-a", "run-b"} {
		if _, err := sshrunner.CreateMachine(t.Context(), r, run, i); err != nil {
			t.Fatal(err)
		}
	}
	def := sshrunner.Definition()
	left, err := def.Leftovers(t.Context(), o, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	dir := path.Join(h.Home, ".cache", "mst", "work", "run-a-shard-0")
	want := "ssh://" + h.User + "@" + h.Addr + dir
	if len(left) != 1 || left[0].ID != want || left[0].Run != "run-a" || left[0].Shard != 0 {
		t.Fatalf("Leftovers(run-a) = %+v, want one with ID %s", left, want)
	}
	if all, err := def.Leftovers(t.Context(), o, ""); err != nil || len(all) != 2 {
		t.Errorf("Leftovers(every run) = %+v, %v; want 2", all, err)
	}
	if err := def.Remove(t.Context(), o, left[0]); err != nil {
		t.Fatalf("Remove(%s) = %v", left[0].ID, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Remove (%v)", dir, err)
	}
	bad := left[0]
	bad.ID = "ssh://" + h.User + "@" + h.Addr + "/etc"
	if err := def.Remove(t.Context(), o, bad); err == nil {
		t.Error("Remove of a folder not named like a shard's = nil, want it refused")
	}
	if left, _ := def.Leftovers(t.Context(), o, ""); len(left) != 1 {
		t.Errorf("Leftovers after one Remove = %+v, want run-b's folder only", left)
	}
}

// signalWriter closes c at its first write.
type signalWriter struct {
	once sync.Once
	c    chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}

func pemEncode(typ string, b []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})
}
