package kubernetes

import (
	"context"

	"github.com/mst-eval/mst/runner"
)

// CreatePod creates one pod of the runner r, as RunShard would for shard i
// of run, for the tests of package kubernetes_test (which import
// runnertest, and through it this package).
func CreatePod(ctx context.Context, r runner.Runner, run string, i int) (runner.Machine, error) {
	return r.(*kubeRunner).create(ctx, podSpec{run: run, shard: i, attempt: 1})
}
