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

// PodManifest is the manifest of a worker's pod for shard 0 of run under
// the runner options, for the tests that show what the API server admits.
func PodManifest(options map[string]string, run, image, version string) ([]byte, error) {
	set, err := parseSettings(options)
	if err != nil {
		return nil, err
	}
	spec := podSpec{run: run, attempt: 1}
	return podManifest(podName(spec), spec, set, image, version), nil
}
