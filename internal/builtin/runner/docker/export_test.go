package docker

import (
	"context"

	"github.com/mst-eval/mst/runner"
)

// CreateContainer starts one container of the runner r, as RunShard would
// for shard i of run, for the tests of package docker_test (which import
// runnertest, and through it this package).
func CreateContainer(ctx context.Context, r runner.Runner, run string, i int) (runner.Machine, error) {
	return r.(*dockerRunner).create(ctx, containerSpec{run: run, shard: i, attempt: 1})
}

// CheckStatic is checkStatic, for tests.
var CheckStatic = checkStatic

// RandomHex is runner.RandomHex, for tests.
var RandomHex = runner.RandomHex

// DockerAnswers reports why no Docker daemon answers, or nil.
func DockerAnswers(ctx context.Context) error {
	c, err := findCLI()
	if err == nil {
		_, _, err = platform(ctx, c)
	}
	return err
}
