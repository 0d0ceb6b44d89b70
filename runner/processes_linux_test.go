package runner_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/runner"
)

// dyingCoordinatorEnv makes this test binary the coordinator of
// TestProcessesWorkerOutlivesNoCoordinator: its value is the folder the
// worker reports in.
const dyingCoordinatorEnv = "MST_RUNNER_TEST_DYING_COORDINATOR"

func init() {
	role = func() {
		if dir := os.Getenv(dyingCoordinatorEnv); dir != "" {
			os.Exit(runDyingCoordinator(dir))
		}
	}
}

// await waits for cond, checking it every few milliseconds, and fails the
// test when it is still false after a minute.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPID reads a process id a script wrote, once the file is whole.
func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(string(b), "\n") {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil
}

// TestProcessesStopsLostWorkerGroup runs a worker that says nothing,
// ignores SIGTERM and started a child that ignores it too: once the
// coordinator has given it up as lost, the worker and its child are both
// gone when RunShard returns.
func TestProcessesStopsLostWorkerGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := `trap '' TERM; (trap '' TERM; exec sleep 100000) </dev/null & echo $! > ` + dir + `/child.tmp && mv ` + dir + `/child.tmp ` + dir + `/child
echo $$ > ` + dir + `/worker.tmp && mv ` + dir + `/worker.tmp ` + dir + `/worker; exec sleep 100000`
	r, err := runner.ProcessesDefinition().New(t.Context(), runner.Params{
		MST: []string{"/bin/sh", "-c", script}, StopGrace: 50 * time.Millisecond,
		Options: map[string]string{"dir": filepath.Join(dir, "shards")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bundle := t.TempDir()
	var worker, child int
	_, err = r.RunShard(t.Context(), runner.Shard{Index: 0, Run: "lost-run", Attempt: 1, BundleDir: bundle,
		Serve: func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
			await(t, "the worker's process ids", func() bool {
				var ok1, ok2 bool
				worker, ok1 = readPID(filepath.Join(dir, "worker"))
				child, ok2 = readPID(filepath.Join(dir, "child"))
				return ok1 && ok2
			})
			return errors.New("worker lost: it sent nothing")
		}})
	if err == nil {
		t.Fatal("RunShard of a lost worker = nil, want the error Serve returned")
	}
	await(t, "the worker to end", func() bool { return proctree.Ended(worker) })
	await(t, "the worker's child to end", func() bool { return proctree.Ended(child) })
}

// TestProcessesWorkerOutlivesNoCoordinator kills (SIGKILL) a coordinator
// whose processes worker ignores its stdin: the worker gets SIGTERM.
func TestProcessesWorkerOutlivesNoCoordinator(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	coord := exec.Command(exe)
	coord.Env = append(os.Environ(), dyingCoordinatorEnv+"="+dir)
	coord.Stderr = os.Stderr
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	defer coord.Wait()
	var worker int
	await(t, "the worker to start", func() bool {
		var ok bool
		worker, ok = readPID(filepath.Join(dir, "worker"))
		return ok
	})
	coord.Process.Kill()
	await(t, "the worker to get SIGTERM", func() bool {
		_, err := os.Stat(filepath.Join(dir, "term"))
		return err == nil
	})
	await(t, "the worker to end", func() bool { return proctree.Ended(worker) })
}

// runDyingCoordinator runs one processes shard whose worker ignores its
// stdin and notes a SIGTERM, and waits to be killed.
func runDyingCoordinator(dir string) int {
	script := `trap 'echo > ` + dir + `/term; exit 0' TERM; echo $$ > ` + dir + `/worker.tmp && mv ` + dir + `/worker.tmp ` + dir + `/worker
while :; do sleep 1; done`
	r, err := runner.ProcessesDefinition().New(context.Background(), runner.Params{
		MST: []string{"/bin/sh", "-c", script}, Options: map[string]string{"dir": filepath.Join(dir, "shards")},
	})
	if err != nil {
		return 1
	}
	bundle, _ := os.MkdirTemp(dir, "bundle")
	r.RunShard(context.Background(), runner.Shard{Index: 0, Run: "dying-run", Attempt: 1, BundleDir: bundle,
		Serve: func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
			<-ctx.Done()
			return ctx.Err()
		}})
	return 0
}
