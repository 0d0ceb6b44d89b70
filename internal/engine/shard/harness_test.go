package shard_test

import (
	"context"
	"errors"
	"io"

	"github.com/mst-eval/mst/internal/engine/shard"
)

// runPipes runs the bundle b through the worker w and the coordinator's
// Serve, connected by two io.Pipes the way the local runner connects them:
// the worker runs on a context that does not end with ctx, so a cancel of
// ctx reaches it only as Serve's cancel message, as it reaches a remote
// worker. fetch is Serve's (nil: the worker writes into the run's store
// itself). runPipes returns what Serve returned once the worker has
// returned too; the worker's own error counts only when Serve saw none.
func runPipes(ctx context.Context, w *shard.Worker, b *shard.Bundle, coord *shard.Coordinator, fetch shard.Fetch) (shard.ShardResult, error) {
	toWorker, fromCoordinator := io.Pipe()
	fromWorker, toCoordinator := io.Pipe()
	workerErr := make(chan error, 1)
	go func() {
		err := w.Run(context.WithoutCancel(ctx), b, toWorker, toCoordinator)
		toCoordinator.Close()
		toWorker.Close()
		workerErr <- err
	}()
	res, err := coord.Serve(ctx, b.Shard, fromWorker, fromCoordinator, fetch)
	// What a runner does once Serve has returned: close the worker's stdin
	// and drain its stdout, so a worker still writing can finish.
	fromCoordinator.Close()
	drained := make(chan struct{})
	go func() {
		io.Copy(io.Discard, fromWorker)
		close(drained)
	}()
	werr := <-workerErr
	<-drained
	if err == nil && werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = werr
	}
	return res, err
}
