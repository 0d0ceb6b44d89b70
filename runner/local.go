package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
)

// LocalDefinition is the local runner: one shard, run by a worker inside
// the mst process.
func LocalDefinition() *Definition {
	return &Definition{
		Name:        "local",
		Description: "Runs the trials in the mst process itself, as one shard.",
		OS:          runtime.GOOS,
		Options:     json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		MaxShards:   1,
		ThisMachine: true,
		New: func(ctx context.Context, p Params) (Runner, error) {
			if p.InProcess == nil {
				return nil, errors.New("local runner: no in-process worker")
			}
			return &Local{Worker: p.InProcess}, nil
		},
	}
}

// Local runs one shard in this process: an in-process worker connected to
// the coordinator by two pipes that carry mst.shard/v1 lines. The worker
// writes into the coordinator's store itself, so Serve gets no fetch.
type Local struct {
	Worker InProcess
}

// RunShard runs the worker and the coordinator's side together. A cancel of
// ctx reaches the worker as a cancel message from Serve, as it would a
// remote one.
func (l *Local) RunShard(ctx context.Context, s Shard) (ShardReport, error) {
	toWorker, fromCoordinator := io.Pipe()
	fromWorker, toCoordinator := io.Pipe()
	workerDone := make(chan error, 1)
	go func() {
		err := l.Worker(context.WithoutCancel(ctx), s.BundleDir, toWorker, toCoordinator)
		toCoordinator.CloseWithError(io.EOF)
		toWorker.Close()
		workerDone <- err
	}()
	err := s.Serve(ctx, fromWorker, fromCoordinator, nil)
	fromCoordinator.Close()
	// Drain what the worker still writes so it can finish.
	go io.Copy(io.Discard, fromWorker)
	<-workerDone
	return ShardReport{Machine: "local"}, err
}

// Close does nothing: the local runner holds nothing.
func (l *Local) Close() error { return nil }
