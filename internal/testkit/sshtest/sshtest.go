// Package sshtest starts private OpenSSH servers for tests: Debian's
// /usr/sbin/sshd with a config, host key, authorized key and known_hosts
// line of its own, in a folder the test owns.
//
// Start runs one host on a free loopback port and stops it when the test
// ends. With Options.Namespace the host gets a network namespace of its
// own, joined to this one by a veth pair, so it has its own address (a
// second machine as far as the network is concerned); where namespaces
// cannot be made (not root, no `ip`), it falls back to loopback and says
// so in Host.Namespace.
//
// Every session on a host runs with HOME set to the host's own folder and
// with MST_SSHTEST set to the host's id, so what a test leaves behind on the
// "machine" stays in its temporary folder, and Sessions can find every
// process a session started, even one whose sshd parent is gone.
//
// A host's lifecycle: New (or Start) writes the files and starts sshd in
// the foreground; Drop cuts every open connection the way a network
// failure would, leaving the session's programs to notice on their own;
// Close stops sshd, then ends whatever its sessions left running, then
// removes the namespace. Close may be called more than once.
//
// Tests that need sshd call Need or Start: without it they fail when CI is
// set (a missing install step must not pass as a skip) and skip otherwise.
package sshtest

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHD is the OpenSSH server the package runs.
const SSHD = "/usr/sbin/sshd"

// MarkEnv is the variable every session on a host gets, set to the host's
// id; Sessions finds processes by it.
const MarkEnv = "MST_SSHTEST"

// ErrNoSSHD means SSHD is not installed.
var ErrNoSSHD = errors.New(SSHD + " is not installed (apt-get install openssh-server)")

// Need fails the test when sshd is missing and CI is set, and skips it
// when sshd is missing otherwise.
func Need(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(ErrNoSSHD)
		}
		t.Skip(ErrNoSSHD)
	}
}

// Keys are a client's key pair and its known_hosts file. Hosts started
// with the same Keys accept the same identity and add their host keys to
// the same known_hosts file, as one user's hosts would.
type Keys struct {
	// Identity is the client's private key file (OpenSSH format, no
	// passphrase); its public key is Identity + ".pub".
	Identity string
	// KnownHosts is the known_hosts file every host started with these
	// keys adds a line to.
	KnownHosts string

	mu         sync.Mutex
	authorized []byte
}

// NewKeys makes a fresh client key pair and an empty known_hosts file in
// dir.
func NewKeys(dir string) (*Keys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	k := &Keys{Identity: filepath.Join(dir, "id_ed25519"), KnownHosts: filepath.Join(dir, "known_hosts")}
	pub, err := writeKeyPair(k.Identity)
	if err != nil {
		return nil, err
	}
	k.authorized = ssh.MarshalAuthorizedKey(pub)
	if err := os.WriteFile(k.KnownHosts, nil, 0o600); err != nil {
		return nil, err
	}
	return k, nil
}

// addHost appends a host's key to the known_hosts file.
func (k *Keys) addHost(addr string, key ssh.PublicKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, err := os.OpenFile(k.KnownHosts, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(addr)}, key))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeKeyPair writes a new ed25519 key pair to path and path.pub and
// returns the public key.
func writeKeyPair(path string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return sshPub, os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(sshPub), 0o644)
}

// Options shape a host.
type Options struct {
	// Keys are the client keys the host accepts and the known_hosts file
	// it adds its key to; nil makes fresh ones in the host's folder.
	Keys *Keys
	// Env is set in every session, after HOME and MST_SSHTEST (so it may
	// replace HOME). PATH here replaces sshd's default PATH.
	Env map[string]string
	// Namespace asks for a network namespace of the host's own when one
	// can be made; otherwise the host listens on loopback.
	Namespace bool
	// NoKnownHosts leaves the host's key out of the known_hosts file, so
	// a client that checks host keys strictly refuses it.
	NoKnownHosts bool
}

// Host is one running sshd.
type Host struct {
	// ID is unique to the host; its sessions carry it in MST_SSHTEST.
	ID string
	// Addr is where sshd listens, host:port.
	Addr string
	// User is the user to log in as: the one running the test.
	User string
	// Keys hold the identity the host accepts and the known_hosts file
	// that has its key (unless Options.NoKnownHosts).
	Keys *Keys
	// HostKey is the host's public key.
	HostKey ssh.PublicKey
	// Home is HOME in the host's sessions.
	Home string
	// Dir holds the host's config, keys and log (Dir/sshd.log).
	Dir string
	// Namespace is the network namespace the host runs in, or "" on
	// loopback.
	Namespace string

	cmd       *exec.Cmd
	exited    chan struct{}
	veth      string
	closeOnce sync.Once
	closeErr  error
}

// Target is the host as the ssh runner's hosts option takes it:
// user@host:port.
func (h *Host) Target() string { return h.User + "@" + h.Addr }

// Start starts a host in a folder of the test's and stops it when the test
// ends. It skips or fails the test as Need does when sshd is missing.
func Start(t testing.TB, o Options) *Host {
	t.Helper()
	Need(t)
	h, err := New(t.TempDir(), o)
	if err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("stopping sshd: %v", err)
		}
	})
	return h
}

// New starts a host whose files live in dir. The caller must Close it.
func New(dir string, o Options) (_ *Host, err error) {
	if _, err := os.Stat(SSHD); err != nil {
		return nil, ErrNoSSHD
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	var id [4]byte
	rand.Read(id[:])
	h := &Host{ID: hex.EncodeToString(id[:]), User: u.Username, Dir: dir, Home: filepath.Join(dir, "home"), exited: make(chan struct{})}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	if err := os.MkdirAll(h.Home, 0o700); err != nil {
		return nil, err
	}
	if h.Keys = o.Keys; h.Keys == nil {
		if h.Keys, err = NewKeys(filepath.Join(dir, "client")); err != nil {
			return nil, err
		}
	}
	hostKey := filepath.Join(dir, "ssh_host_ed25519_key")
	if h.HostKey, err = writeKeyPair(hostKey); err != nil {
		return nil, err
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, h.Keys.authorized, 0o600); err != nil {
		return nil, err
	}

	var prefix []string
	if o.Namespace {
		if addr, err := h.makeNamespace(); err == nil {
			h.Addr = addr
			prefix = []string{"ip", "netns", "exec", h.Namespace}
		}
	}
	if h.Addr == "" {
		if h.Addr, err = freeLoopbackAddr(); err != nil {
			return nil, err
		}
	}

	env := []string{"HOME=" + h.Home, MarkEnv + "=" + h.ID}
	keys := make([]string, 0, len(o.Env))
	for k := range o.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+o.Env[k])
	}
	var setEnv []string
	for _, kv := range env {
		if strings.ContainsAny(kv, "\"\n") {
			return nil, fmt.Errorf("session variable %q: quotes and newlines cannot go in sshd_config", kv)
		}
		setEnv = append(setEnv, `"`+kv+`"`)
	}
	config := filepath.Join(dir, "sshd_config")
	conf := strings.Join([]string{
		"ListenAddress " + h.Addr,
		"HostKey " + hostKey,
		"AuthorizedKeysFile " + authorized,
		"PidFile none",
		"UsePAM no",
		"StrictModes no",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"UseDNS no",
		"MaxStartups 100",
		"MaxSessions 100",
		"LogLevel VERBOSE",
		"SetEnv " + strings.Join(setEnv, " "),
	}, "\n") + "\n"
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// sshd running as root wants its privilege separation folder.
		os.MkdirAll("/run/sshd", 0o755)
	}
	argv := append(prefix, SSHD, "-D", "-f", config, "-E", filepath.Join(dir, "sshd.log"))
	h.cmd = exec.Command(argv[0], argv[1:]...)
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", SSHD, err)
	}
	go func() {
		h.cmd.Wait()
		close(h.exited)
	}()
	if err := h.waitReady(10 * time.Second); err != nil {
		return nil, err
	}
	if !o.NoKnownHosts {
		if err := h.Keys.addHost(h.Addr, h.HostKey); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// waitReady waits until sshd answers with its banner.
func (h *Host) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-h.exited:
			return fmt.Errorf("sshd exited at start: %s", h.logTail())
		default:
		}
		conn, err := net.DialTimeout("tcp", h.Addr, time.Second)
		if err == nil {
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, rerr := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if rerr == nil && strings.HasPrefix(line, "SSH-") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd did not answer on %s within %s: %s", h.Addr, limit, h.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail returns the end of the host's sshd log.
func (h *Host) logTail() string {
	b, _ := os.ReadFile(filepath.Join(h.Dir, "sshd.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// freeLoopbackAddr returns a loopback address with a port nobody listens
// on right now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	l.Close()
	return addr, nil
}

// Sessions returns the processes the host's sessions started that are
// still running: those below sshd that are not sshd itself, and those
// that carry the host's mark even though their parent is gone.
func (h *Host) Sessions() []int {
	var out []int
	for _, p := range h.processes() {
		if p.comm != "sshd" || p.marked {
			out = append(out, p.pid)
		}
	}
	return out
}

// Drop cuts every open connection to the host, as a failed network would:
// it kills the sshd processes that serve them and leaves the programs they
// started running, to notice on their own. It returns how many processes
// it killed. sshd keeps accepting new connections.
func (h *Host) Drop() (int, error) {
	n := 0
	var errs []error
	for _, p := range h.processes() {
		if p.comm == "sshd" && !p.marked {
			if err := signal(p.pid, os.Kill); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// Close stops sshd and then, in steps (SIGTERM, a grace period, SIGKILL),
// whatever its sessions left running, and removes the host's network
// namespace. It is safe to call more than once.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		var left []int
		if h.cmd != nil && h.cmd.Process != nil {
			for _, p := range h.processes() {
				left = append(left, p.pid)
			}
			h.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-h.exited:
			case <-time.After(5 * time.Second):
				h.cmd.Process.Kill()
				<-h.exited
			}
		}
		stopAll(left)
		if h.Namespace != "" {
			h.closeErr = h.removeNamespace()
		}
	})
	return h.closeErr
}

// stopAll stops processes in steps: SIGTERM, up to two seconds, SIGKILL.
func stopAll(pids []int) {
	for _, pid := range pids {
		signal(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			signal(pid, os.Kill)
		}
	}
}

// signal sends sig to pid; a process that is already gone is no error.
func signal(pid int, sig os.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	st, err := readStat(pid)
	return err == nil && st.state != "Z"
}

// proc is what Sessions and Drop need to know of a process.
type proc struct {
	pid, ppid int
	state     string
	comm      string
	marked    bool
}

// processes lists the live processes that belong to the host: sshd's
// descendants, and anything that carries the host's mark.
func (h *Host) processes() []proc {
	if h.cmd == nil || h.cmd.Process == nil {
		return nil
	}
	root := h.cmd.Process.Pid
	entries, _ := os.ReadDir("/proc")
	all := map[int]proc{}
	children := map[int][]int{}
	mark := []byte(MarkEnv + "=" + h.ID + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.state == "Z" {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil {
			st.marked = strings.Contains(string(env), string(mark))
		}
		all[pid] = st
		children[st.ppid] = append(children[st.ppid], pid)
	}
	seen := map[int]bool{}
	var out []proc
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			if !seen[c] {
				seen[c] = true
				out = append(out, all[c])
				walk(c)
			}
		}
	}
	walk(root)
	for pid, p := range all {
		if p.marked && !seen[pid] && pid != root {
			seen[pid] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// readStat reads a process's state, parent and command name from
// /proc/PID/stat.
func readStat(pid int) (proc, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, err
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return proc{}, fmt.Errorf("odd /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[close+1:])
	if len(fields) < 2 {
		return proc{}, fmt.Errorf("odd /proc/%d/stat", pid)
	}
	ppid, _ := strconv.Atoi(fields[1])
	return proc{pid: pid, ppid: ppid, state: fields[0], comm: s[open+1 : close]}, nil
}
