//go:build linux

package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/internal/testkit/sshtest"
)

// TestDetachSSH cancels a detached run on the ssh runner mid-run, and
// kills another one's coordinator and finishes its run with a resume: the
// processes runner's tests (testDetachCancel, testDetachLost) with the
// coordinator in a folder of a private sshd host, which also runs the
// worker, and the bucket in the GCS emulator of this process. It sets the
// test process's environment, so it is not a part of TestSSH, which runs
// beside other tests.
func TestDetachSSH(t *testing.T) {
	sshtest.Need(t)
	start := time.Now()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "github.com/mst-eval/mst/cmd/mst")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building mst: %v\n%s", err, out)
	}
	mst := filepath.Join(dir, "mst")
	t.Logf("building mst took %s", time.Since(start).Round(time.Millisecond))
	t.Run("Cancel", func(t *testing.T) { timed(t, func() { testDetachCancel(t, sshWorld(mst)) }) })
	t.Run("Lost", func(t *testing.T) { timed(t, func() { testDetachLost(t, sshWorld(mst)) }) })
}

// sshWorld is the ssh runner with the mst program: one host, started once
// the bucket's emulator is known, runs the coordinator and the worker. The
// hosts share this machine's files and processes, so the test reads the
// coordinator's folder and kills its processes directly.
func sshWorld(mst string) *detachWorld {
	var h *sshtest.Host
	folder := func(t *testing.T) string {
		m, _ := filepath.Glob(filepath.Join(h.Home, ".cache", "mst", "work", "coordinator-*"))
		if len(m) != 1 {
			t.Fatalf("coordinator folders on the host: %v, want one", m)
		}
		return m[0]
	}
	w := &detachWorld{bin: mst, server: testServerCommand}
	w.start = func(t *testing.T, emulator string) {
		// The host's own environment names the bucket's emulator, as a
		// machine's own identity would, and the lease of a killed
		// coordinator's lock.
		h = startSSHHost(t, sshtest.Options{Env: map[string]string{"STORAGE_EMULATOR_HOST": emulator, cli.LeaseEnv: "2s"}})
		w.runner = sshOptions(h)
	}
	w.files = func(t *testing.T, _ map[string]any) map[string][]byte { return folderFiles(folder(t)) }
	w.kill = func(t *testing.T, s map[string]any) {
		// The coordinator, what it started and its watchdog die at once,
		// and the folder goes with the machine's disk.
		dir := folder(t)
		pid := int(s["pid"].(float64))
		pids := append([]int{pid}, proctree.Descendants(pid)...)
		if b, err := os.ReadFile(filepath.Join(dir, "watchdog.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pids = append(pids, pid)
			}
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		os.RemoveAll(dir)
	}
	return w
}
