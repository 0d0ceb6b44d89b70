package ssh

import (
	"context"
	"time"

	"github.com/mst-eval/mst/runner"
)

// CreateMachine makes shard i's machine of run runID with a runner that
// Definition made, so tests can check the machine on its own.
func CreateMachine(ctx context.Context, r runner.Runner, runID string, i int) (runner.Machine, error) {
	m, err := r.(*sshRunner).create(ctx, runID, 1, i, false)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// CreateGcloudMachine makes shard i's VM of run runID with a runner that
// GcloudDefinition made.
func CreateGcloudMachine(ctx context.Context, r runner.Runner, runID string, i int) (runner.Machine, error) {
	m, err := r.(*gcloudRunner).create(ctx, runID, 1, i, false)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// CoordinatorWatchdog returns the process id of the watchdog an ssh
// coordinator machine started.
func CoordinatorWatchdog(c runner.CoordinatorMachine) string {
	return c.(*sshCoordinatorMachine).watchdog
}

// StartWatchdog starts a watchdog of dir on m's host the way a coordinator
// machine starts its own, with grace between SIGTERM and SIGKILL, and
// returns its process id.
func StartWatchdog(ctx context.Context, m runner.Machine, dir string, deadline, grace time.Duration) (string, error) {
	mm := m.(*machine)
	argv := append(WatchdogArgv(mm.mst[0], dir, deadline), "--grace", grace.String())
	return startWatchdog(ctx, mm.r, argv, dir)
}
