package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"

	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/store"
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
			if p.Worker == nil {
				return nil, errors.New("local runner: no worker")
			}
			return &Local{Worker: p.Worker}, nil
		},
	}
}

// Local runs one shard in this process: an in-process worker connected to
// the coordinator by two pipes that carry mst.shard/v1 lines.
type Local struct {
	// Worker is copied per shard; its Results is set to the run folder.
	Worker *shard.Worker
}

// RunShard runs the worker and the coordinator's side together. A cancel of
// ctx reaches the worker as a cancel message, as it would a remote one.
func (l *Local) RunShard(ctx context.Context, s Shard) (ShardReport, error) {
	w := *l.Worker
	w.Results = &store.Run{Dir: s.Results}
	toWorker, fromCoordinator := io.Pipe()
	fromWorker, toCoordinator := io.Pipe()
	workerDone := make(chan error, 1)
	go func() {
		err := w.Run(context.WithoutCancel(ctx), s.Bundle, toWorker, toCoordinator)
		toCoordinator.Close()
		workerDone <- err
	}()
	res, err := s.Serve(ctx, s.Bundle.Shard, fromWorker, fromCoordinator, nil)
	fromCoordinator.Close()
	// Drain what the worker still writes so it can finish.
	go io.Copy(io.Discard, fromWorker)
	<-workerDone
	return ShardReport{Result: res, Machine: "local"}, err
}

// Close does nothing: the local runner holds nothing.
func (l *Local) Close() error { return nil }
