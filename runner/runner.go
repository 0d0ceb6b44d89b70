// Package runner creates the machines a run's shards run on and connects a
// worker on each to the coordinator. The built-in local runner runs one
// shard in the mst process itself, through the same protocol and worker
// loop as every other runner.
package runner

import (
	"context"
	"io"

	"github.com/mst-eval/mst/shard"
)

// Serve is the coordinator's side of one shard's channel: it reads the
// worker's stdout from in and writes to the worker's stdin through out.
type Serve func(ctx context.Context, shardIndex int, in io.Reader, out io.Writer) (shard.ShardResult, error)

// Runner runs shards.
type Runner interface {
	// Name is the runner's name in run.json ("local").
	Name() string
	// MaxShards is the most shards the runner runs at once.
	MaxShards() int
	// RunShard starts a worker for bundle b, writing transcripts to the run
	// folder results, and connects it to serve. It returns when the worker
	// has ended.
	RunShard(ctx context.Context, b *shard.Bundle, results string, serve Serve) (shard.ShardResult, error)
}
