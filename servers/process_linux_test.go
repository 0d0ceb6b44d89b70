package servers_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/servers"
)

// withChild wraps a stdio server in sh, which starts a child that ignores
// SIGTERM and stdin (a helper the server forked) and then execs the server
// under its own id. It returns the wrapped server and a function that
// reads the server's and the child's ids once the server has started.
func withChild(t *testing.T, s servers.Server) (servers.Server, func() (server, child int)) {
	t.Helper()
	dir := t.TempDir()
	s.Args = append([]string{"-c", `echo $$ > "$MST_DIR/server"; (trap '' TERM; exec sleep 100000) </dev/null >/dev/null 2>&1 & echo $! > "$MST_DIR/child"; exec "$0" "$@"`, s.Command}, s.Args...)
	s.Command = "/bin/sh"
	env := map[string]string{"MST_DIR": dir}
	for k, v := range s.Env {
		env[k] = v
	}
	s.Env = env
	return s, func() (int, int) {
		t.Helper()
		read := func(name string) int {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("the server never wrote its %s's id: %v", name, err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s id %q: %v", name, b, err)
			}
			return pid
		}
		return read("server"), read("child")
	}
}

// awaitEnded waits for each pid to end, reading its state in /proc, and
// fails the test when one still runs after a minute.
func awaitEnded(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, pid := range pids {
		for !proctree.Ended(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("%s: process %d still runs", what, pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestCloseStopsWhatTheServerStarted closes servers that started a child
// of their own: one that exits when its stdin closes and one that ignores
// that and SIGTERM. Close leaves neither the server nor its child.
func TestCloseStopsWhatTheServerStarted(t *testing.T) {
	t.Parallel()
	for _, role := range []string{"catalog", "deaf"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			s, pids := withChild(t, fixture(t, role, role))
			c, err := servers.Connect(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			server, child := pids()
			c.Close()
			awaitEnded(t, "after Close", server, child)
		})
	}
}

// TestStopAll kills the servers a process has not closed, with what they
// started: what a worker does on its way out.
func TestStopAll(t *testing.T) {
	s, pids := withChild(t, fixture(t, "deaf", "deaf"))
	c, err := servers.Connect(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server, child := pids()
	servers.StopAll()
	awaitEnded(t, "after StopAll", server, child)
}

// TestServerDiesWithItsWorker kills (SIGKILL) a process that started a
// server that ignores the end of its stdin and SIGTERM: the server goes
// with it.
func TestServerDiesWithItsWorker(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"=connect-deaf", "MST_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("the worker said nothing: %v", err)
	}
	server, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("the worker said %q, want its server's id", line)
	}
	cmd.Process.Kill()
	awaitEnded(t, "after its worker was killed", server)
}
