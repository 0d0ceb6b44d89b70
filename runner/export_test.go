package runner

import "context"

// CreateProcessesMachine creates shard i's machine with a runner that
// ProcessesDefinition made, so tests can check the folder machine and wrap
// it.
func CreateProcessesMachine(ctx context.Context, r Runner, i int) (Machine, error) {
	return r.(*processes).create(ctx, i)
}
