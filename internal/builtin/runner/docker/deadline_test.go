package docker_test

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/docker"
	"github.com/mst-eval/mst/runner"
)

// TestContainerDeadline checks that a shard's container ends by itself at
// the machine deadline the run gives (mst runner idle --deadline), so one
// a dead coordinator leaves behind goes away: docker wait, which returns
// when the container stops, gets the exit code 0 of an idle that ended
// well, and the container is left stopped, not running.
func TestContainerDeadline(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	run := "deadlinetest-" + docker.RandomHex(4)
	t.Cleanup(func() { noContainersOf(t, run) })
	r, err := docker.New(t.Context(), runner.Params{
		MST: []string{mst}, MSTVersion: testVersion, Logger: slog.New(slog.DiscardHandler),
		Deadline: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	m, err := docker.CreateContainer(t.Context(), r, run, 0)
	if err != nil {
		t.Fatalf("creating a container: %v", err)
	}
	defer m.Remove(context.WithoutCancel(t.Context()))
	// A bound for a container that never ends, not a measure of when it
	// does.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "wait", m.ID()).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("docker wait %s = %q, %v (%v); want the container to end by itself with exit code 0", m.ID(), out, err, ctx.Err())
	}
	state, err := exec.Command("docker", "inspect", "--format", "{{.State.Status}} {{.State.OOMKilled}} {{join .Args \" \"}}", m.ID()).CombinedOutput()
	if got := strings.TrimSpace(string(state)); err != nil || got != "exited false runner idle --deadline 5s" {
		t.Errorf("the container's state and arguments: %q, %v; want it exited (not killed) after runner idle --deadline 5s", got, err)
	}
}
