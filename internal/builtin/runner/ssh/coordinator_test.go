package ssh_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	sshrunner "github.com/mst-eval/mst/internal/builtin/runner/ssh"
	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/internal/testkit/sshtest"
	"github.com/mst-eval/mst/runner"
)

// waitFor polls cond until it holds, for up to a generous minute: each
// check looks at the event itself (a file, a process).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ended reports whether process pid (a string) has exited.
func ended(pid string) bool {
	n, err := strconv.Atoi(pid)
	return err != nil || proctree.Ended(n)
}

// session lists the processes of session sid, from /proc.
func session(sid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 3 && f[3] == strconv.Itoa(sid) && f[0] != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// readPIDFile waits for a pid file to be written and returns its pid.
func readPIDFile(t *testing.T, file string) int {
	t.Helper()
	var pid int
	waitFor(t, file, func() bool {
		b, _ := os.ReadFile(file)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		pid = n
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	return pid
}

// killGroupAtEnd kills process group pid when the test ends, before the
// host checks that its sessions left nothing running.
func killGroupAtEnd(t *testing.T, pid int) {
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL); syscall.Kill(pid, syscall.SIGKILL) })
}

func coordinatorParams(t *testing.T, o map[string]string, id string, deadline time.Duration) runner.CoordinatorParams {
	return runner.CoordinatorParams{Options: o, ID: id, Deadline: deadline, MST: []string{mstBinary(t)}}
}

// noKeyMaterial fails the test if any file under the host's home holds
// the private key in keyFile (its PEM text or any line of it), or, outside
// the mst binaries MST installs there, any private key but those listed
// in allowed.
func noKeyMaterial(t *testing.T, h *sshtest.Host, keyFile string, allowed ...string) {
	t.Helper()
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// Lines every unencrypted key of its type shares (the format's
	// header) say nothing; the others are this key's.
	other, err := sshtest.NewKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := os.ReadFile(other.Identity)
	var lines [][]byte
	for _, l := range bytes.Split(key, []byte("\n")) {
		if len(l) > 32 && !bytes.Contains(ref, l) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatal("no line of the key to look for")
	}
	bin := filepath.Join(h.Home, ".cache", "mst", "bin") + string(filepath.Separator)
	checked := 0
	filepath.WalkDir(h.Home, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		checked++
		for _, l := range lines {
			if bytes.Contains(b, l) {
				t.Errorf("%s on the host holds the user's private key", p)
				return nil
			}
		}
		for _, a := range allowed {
			if p == a {
				return nil
			}
		}
		if !strings.HasPrefix(p, bin) && bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("%s on the host holds a private key", p)
		}
		return nil
	})
	if checked == 0 {
		t.Error("no file on the host to check")
	}
}

// TestCoordinator makes an ssh coordinator machine and uses it as the
// launching mst and the coordinator do: mst runs there, files go both
// ways, a process in a session of its own outlives the Exec that started
// it, nothing of the user's key is on the host, and Finish stops the
// watchdog and deletes the folder.
func TestCoordinator(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	c, err := sshrunner.Definition().Coordinator(t.Context(), coordinatorParams(t, options(h), "detached-one", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Dispose(context.WithoutCancel(t.Context()))
	dir := c.WorkDir()
	if want := path.Join(h.Home, ".cache", "mst", "work", "coordinator-detached-one"); dir != want || !exists(dir) {
		t.Fatalf("WorkDir() = %s (there: %v), want %s on the host", dir, exists(dir), want)
	}
	if want := "ssh://" + h.User + "@" + h.Addr + dir; c.ID() != want {
		t.Errorf("ID() = %s, want %s", c.ID(), want)
	}
	if id := c.Identity(); !strings.Contains(id, h.User) || !strings.Contains(id, h.Addr) || !strings.Contains(id, h.Keys.Identity) || !strings.Contains(id, "not copied") {
		t.Errorf("Identity() = %q, want the user, the host and the key file there", id)
	}
	if env := c.Env(); len(env) != 0 {
		t.Errorf("Env() = %q, want none", env)
	}
	watchdog := sshrunner.CoordinatorWatchdog(c)
	if ended(watchdog) {
		t.Fatalf("the watchdog %s is not running", watchdog)
	}

	var out bytes.Buffer
	if err := c.Exec(t.Context(), append(c.MST(), "version"), nil, &out, &out); err != nil || strings.TrimSpace(out.String()) != "mst "+testVersion {
		t.Fatalf("mst version on the coordinator machine = %q, %v; want mst %s", out.String(), err, testVersion)
	}

	local := t.TempDir()
	os.MkdirAll(filepath.Join(local, "bundle", "sub"), 0o755)
	os.WriteFile(filepath.Join(local, "bundle", "detach.json"), []byte(`{"command":"run"}`), 0o644)
	os.WriteFile(filepath.Join(local, "bundle", "sub", "eval.yaml"), []byte("cases: []\n"), 0o644)
	remote := path.Join(dir, "detached", "detached-one")
	if err := c.CopyTo(t.Context(), filepath.Join(local, "bundle"), remote); err != nil {
		t.Fatalf("CopyTo = %v", err)
	}
	back := filepath.Join(local, "back.yaml")
	if err := c.CopyFrom(t.Context(), path.Join(remote, "sub", "eval.yaml"), back); err != nil {
		t.Fatalf("CopyFrom = %v", err)
	}
	if b, _ := os.ReadFile(back); string(b) != "cases: []\n" {
		t.Errorf("the file copied there and back holds %q", b)
	}

	// A coordinator started in a session of its own outlives the Exec.
	start := `setsid sh -c 'echo $$ > coordinator.pid.tmp && mv coordinator.pid.tmp coordinator.pid && exec sleep 600' </dev/null >/dev/null 2>&1 &`
	if err := c.Exec(t.Context(), []string{"sh", "-c", start}, nil, nil, nil); err != nil {
		t.Fatalf("starting a process in a session of its own: %v", err)
	}
	pid := readPIDFile(t, filepath.Join(dir, sshrunner.CoordinatorPIDFile))
	killGroupAtEnd(t, pid)
	if proctree.Ended(pid) {
		t.Fatalf("the process %d started in a session of its own ended with the Exec", pid)
	}
	noKeyMaterial(t, h, h.Keys.Identity)

	// The coordinator runs Finish on its machine at the end.
	if err := c.Exec(t.Context(), c.Finish(), nil, &out, &out); err != nil {
		t.Fatalf("Finish %q = %v: %s", c.Finish(), err, out.String())
	}
	if exists(dir) {
		t.Errorf("%s is still there after Finish", dir)
	}
	waitFor(t, "the watchdog to end after Finish", func() bool { return ended(watchdog) })
}

// TestCoordinatorDispose checks that Dispose stops the watchdog and
// deletes the folder, and that it can be called again.
func TestCoordinatorDispose(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	c, err := sshrunner.Definition().Coordinator(t.Context(), coordinatorParams(t, options(h), "disposed", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	watchdog := sshrunner.CoordinatorWatchdog(c)
	for i := range 2 {
		if err := c.Dispose(t.Context()); err != nil {
			t.Fatalf("Dispose #%d = %v", i+1, err)
		}
	}
	if exists(c.WorkDir()) {
		t.Errorf("%s is still there after Dispose", c.WorkDir())
	}
	waitFor(t, "the watchdog to end after Dispose", func() bool { return ended(watchdog) })
}

// TestCoordinatorDeadline gives the machine a short deadline: its
// watchdog deletes the folder and ends by itself.
func TestCoordinatorDeadline(t *testing.T) {
	t.Parallel()
	h := startHost(t, sshtest.Options{})
	c, err := sshrunner.Definition().Coordinator(t.Context(), coordinatorParams(t, options(h), "short", time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Dispose(context.WithoutCancel(t.Context()))
	watchdog := sshrunner.CoordinatorWatchdog(c)
	waitFor(t, "the folder to go at the deadline", func() bool { return !exists(c.WorkDir()) })
	waitFor(t, "the watchdog to end at the deadline", func() bool { return ended(watchdog) })
}

// TestWatchdog starts watchdogs as a coordinator machine does, over SSH,
// each with its own folder and pid file, and checks what each does at the
// deadline: a coordinator's session ends on SIGTERM, or on SIGKILL after
// the grace when it ignores SIGTERM; a pid that leads no session (a stale
// file) and a missing pid file signal nothing; every folder is deleted.
func TestWatchdog(t *testing.T) {
	t.Parallel()
	_, m := hostMachine(t, "watchdog")
	defer m.Remove(context.WithoutCancel(t.Context()))
	// Each starter runs in its folder and leaves the pid file there.
	tests := []struct {
		name, start string
		// ends says the process in the pid file must end.
		ends bool
	}{
		{"ends on SIGTERM", `setsid sh -c 'sleep 600 & echo $$ > coordinator.pid; wait' </dev/null >/dev/null 2>&1 &`, true},
		{"ignores SIGTERM", `setsid sh -c 'trap "" TERM; sleep 600 & echo $$ > coordinator.pid; wait' </dev/null >/dev/null 2>&1 &`, true},
		{"stale pid file", `sleep 600 </dev/null >/dev/null 2>&1 & echo $! > coordinator.pid`, false},
		{"no pid file", ``, false},
	}
	for i, tt := range tests {
		dir := path.Join(m.WorkDir(), "c"+strconv.Itoa(i))
		if err := m.Exec(t.Context(), []string{"sh", "-c", "mkdir " + dir + " && cd " + dir + " || exit 1\n" + tt.start + "\ntrue"}, nil, nil, nil); err != nil {
			t.Fatalf("%s: starting: %v", tt.name, err)
		}
		var pid int
		var members []int
		if tt.start != "" {
			pid = readPIDFile(t, filepath.Join(dir, sshrunner.CoordinatorPIDFile))
			killGroupAtEnd(t, pid)
			if tt.ends {
				waitFor(t, tt.name+": the sleep beside the coordinator", func() bool { members = session(pid); return len(members) == 2 })
			}
		}
		watchdog, err := sshrunner.StartWatchdog(t.Context(), m, dir, 200*time.Millisecond, time.Second)
		if err != nil {
			t.Fatalf("%s: StartWatchdog = %v", tt.name, err)
		}
		waitFor(t, tt.name+": the folder to go", func() bool { return !exists(dir) })
		waitFor(t, tt.name+": the watchdog to end", func() bool { return ended(watchdog) })
		switch {
		case tt.ends:
			waitFor(t, tt.name+": the coordinator's session to end", func() bool {
				for _, p := range members {
					if !proctree.Ended(p) {
						return false
					}
				}
				return true
			})
		case pid != 0 && proctree.Ended(pid):
			t.Errorf("%s: the watchdog ended process %d, which leads no session", tt.name, pid)
		}
	}
}

// TestCoordinatorNeedsOwnKeys checks the coordinator host for SSH
// credentials of its own, resolved against its HOME there: without a key
// file of its own, or with an identity or known_hosts path that exists
// only on the launching machine, the coordinator machine is refused with
// what to do, and nothing is left on the host.
func TestCoordinatorNeedsOwnKeys(t *testing.T) {
	h := startHost(t, sshtest.Options{})
	mstBinary(t)
	// The launching machine's HOME has the keys and known_hosts the
	// coordinator host lacks.
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	key, _ := os.ReadFile(h.Keys.Identity)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), key, 0o600)
	os.WriteFile(filepath.Join(home, ".ssh", "id_mst"), key, 0o600)
	known, _ := os.ReadFile(h.Keys.KnownHosts)
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), known, 0o600)
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")
	defaults := map[string]string{"hosts": h.Target(), "knownHosts": h.Keys.KnownHosts}
	tests := []struct {
		name string
		o    map[string]string
		want string
	}{
		{"no key of its own", defaults, "no SSH key of its own (~/.ssh/id_ed25519, id_ecdsa or id_rsa there)"},
		{"identity only here", map[string]string{"hosts": h.Target(), "identity": "~/.ssh/id_mst", "knownHosts": h.Keys.KnownHosts},
			"identity=~/.ssh/id_mst: there is no readable key file " + path.Join(h.Home, ".ssh", "id_mst")},
		{"known_hosts only here", map[string]string{"hosts": h.Target(), "identity": h.Keys.Identity},
			"no known_hosts file " + path.Join(h.Home, ".ssh", "known_hosts")},
	}
	for _, tt := range tests {
		_, err := sshrunner.Definition().Coordinator(t.Context(), coordinatorParams(t, tt.o, "refused", time.Hour))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "coordinator host "+h.Target()) {
			t.Errorf("%s: Coordinator = %v\nwant an error naming the host and containing %q", tt.name, err, tt.want)
		}
	}
	if exists(path.Join(h.Home, ".cache", "mst", "work", "coordinator-refused")) {
		t.Error("a refused coordinator machine left its folder on the host")
	}
	// With a key of the host's own, the same options are taken.
	other, err := sshtest.NewKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	own, _ := os.ReadFile(other.Identity)
	os.MkdirAll(filepath.Join(h.Home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(h.Home, ".ssh", "id_ed25519"), own, 0o600)
	c, err := sshrunner.Definition().Coordinator(t.Context(), coordinatorParams(t, defaults, "own-key", time.Hour))
	if err != nil {
		t.Fatalf("Coordinator with a key of the host's own = %v", err)
	}
	defer c.Dispose(context.WithoutCancel(t.Context()))
	if id := c.Identity(); !strings.Contains(id, "its own SSH keys there") {
		t.Errorf("Identity() = %q, want it to say the host's own keys are used", id)
	}
}

// TestCoordinatorNoAgent logs in to the coordinator host with the user's
// key in an SSH agent: the agent is not forwarded there, and the key is
// nowhere on the host.
func TestCoordinatorNoAgent(t *testing.T) {
	h := startHost(t, sshtest.Options{})
	mstBinary(t)
	raw, err := os.ReadFile(h.Keys.Identity)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ssh.ParseRawPrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				agent.ServeAgent(keyring, conn)
			}()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	// The host's own key, which the coordinator would log in to the
	// hosts with.
	other, err := sshtest.NewKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	own, _ := os.ReadFile(other.Identity)
	os.MkdirAll(filepath.Join(h.Home, ".ssh"), 0o700)
	hostKey := filepath.Join(h.Home, ".ssh", "id_ed25519")
	os.WriteFile(hostKey, own, 0o600)

	o := map[string]string{"hosts": h.Target(), "knownHosts": h.Keys.KnownHosts}
	c, err := sshrunner.Definition().Coordinator(t.Context(), coordinatorParams(t, o, "agent", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Dispose(context.WithoutCancel(t.Context()))
	var out bytes.Buffer
	if err := c.Exec(t.Context(), []string{"sh", "-c", `printf '%s' "${SSH_AUTH_SOCK:-none}"`}, nil, &out, &out); err != nil || out.String() != "none" {
		t.Errorf("SSH_AUTH_SOCK on the coordinator machine = %q, %v; want none (no agent forwarded)", out.String(), err)
	}
	noKeyMaterial(t, h, h.Keys.Identity, hostKey)
}
