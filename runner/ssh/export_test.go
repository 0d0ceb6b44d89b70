package ssh

import (
	"context"

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
