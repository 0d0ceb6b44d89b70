package runner

import (
	"context"
	"io"

	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/store"
)

// Local runs one shard in this process: an in-process worker connected to
// the coordinator by two pipes that carry mst.shard/v1 lines.
type Local struct {
	// Worker runs the shard's trials; its Results is set per shard.
	Worker *shard.Worker
	// Redact removes secret values from every file the worker writes
	// (transcripts); nil removes nothing.
	Redact *secrets.Redactor
}

func (*Local) Name() string   { return "local" }
func (*Local) MaxShards() int { return 1 }

// RunShard runs the worker and the coordinator's side together. A cancel of
// ctx reaches the worker as a cancel message, as it would a remote one.
func (l *Local) RunShard(ctx context.Context, b *shard.Bundle, results string, serve Serve) (shard.ShardResult, error) {
	w := *l.Worker
	w.Results = &store.Run{Dir: results, Redact: l.Redact}
	toWorker, fromCoordinator := io.Pipe()
	fromWorker, toCoordinator := io.Pipe()
	workerDone := make(chan error, 1)
	go func() {
		err := w.Run(context.WithoutCancel(ctx), b, toWorker, toCoordinator)
		toCoordinator.Close()
		workerDone <- err
	}()
	res, err := serve(ctx, b.Shard, fromWorker, fromCoordinator)
	fromCoordinator.Close()
	// Drain what the worker still writes so it can finish.
	go io.Copy(io.Discard, fromWorker)
	<-workerDone
	return res, err
}
