package sshtest_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/mst-eval/mst/internal/testkit/sshtest"
)

// dial logs in to h with its keys, checking its host key strictly.
func dial(t *testing.T, h *sshtest.Host) *ssh.Client {
	t.Helper()
	pem, err := os.ReadFile(h.Keys.Identity)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(h.Keys.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", h.Addr, &ssh.ClientConfig{
		User: h.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: check, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("dialling %s: %v", h.Addr, err)
	}
	return c
}

func TestHosts(t *testing.T) {
	t.Parallel()
	for _, ns := range []bool{false, true} {
		t.Run(map[bool]string{false: "loopback", true: "namespace"}[ns], func(t *testing.T) {
			t.Parallel()
			h := sshtest.Start(t, sshtest.Options{Namespace: ns, Env: map[string]string{"GREETING": "hello there"}})
			if ns && h.Namespace == "" {
				t.Logf("no network namespace here; the host runs on %s", h.Addr)
			}
			c := dial(t, h)
			defer c.Close()
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.Output(`printf '%s|%s|%s' "$HOME" "$GREETING" "$` + sshtest.MarkEnv + `"`)
			if err != nil {
				t.Fatalf("running a command: %v", err)
			}
			if want := h.Home + "|hello there|" + h.ID; string(out) != want {
				t.Errorf("session environment = %q, want %q", out, want)
			}
		})
	}
}

// TestDrop cuts a connection with a command running: the client sees the
// connection end, the command notices its stdin closed and ends, and
// Sessions then lists nothing.
func TestDrop(t *testing.T) {
	t.Parallel()
	h := sshtest.Start(t, sshtest.Options{})
	c := dial(t, h)
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, _ := s.StdinPipe()
	defer stdin.Close()
	// cat runs until its stdin ends.
	if err := s.Start("echo started; exec cat"); err != nil {
		t.Fatal(err)
	}
	// The command has run once its first line arrives: drop only then.
	started := make([]byte, len("started\n"))
	if _, err := io.ReadFull(stdout, started); err != nil || string(started) != "started\n" {
		t.Fatalf("the command's first output = %q, %v; want started", started, err)
	}
	go io.Copy(io.Discard, stdout)
	waitFor(t, "the command to start", func() bool { return len(h.Sessions()) > 0 })
	n, err := h.Drop()
	if err != nil || n == 0 {
		t.Fatalf("Drop() = %d, %v; want some sshd processes killed", n, err)
	}
	if err := s.Wait(); err == nil {
		t.Error("Wait after Drop = nil, want the lost connection")
	}
	waitFor(t, "the session's command to end", func() bool { return len(h.Sessions()) == 0 })
	// The host still takes new connections.
	c2 := dial(t, h)
	c2.Close()
}

func TestUnknownHost(t *testing.T) {
	t.Parallel()
	h := sshtest.Start(t, sshtest.Options{NoKnownHosts: true})
	check, err := knownhosts.New(h.Keys.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ssh.Dial("tcp", h.Addr, &ssh.ClientConfig{User: h.User, HostKeyCallback: check, Timeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "knownhosts: key is unknown") {
		t.Errorf("dialling a host missing from known_hosts = %v, want the key refused as unknown", err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
