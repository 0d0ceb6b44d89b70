package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"time"
)

// BundleFile is the name of the bundle's description in the bundle folder.
const BundleFile = "bundle.json"

// MachineRunner builds a whole runner from a function that creates one
// machine per shard. For each shard it:
//
//  1. creates the machine;
//  2. writes the bundle (the resolved variants, the shard's cases and trial
//     keys) to a local folder and copies it to WORK/bundle on the machine;
//  3. starts `mst collect --bundle WORK/bundle --results WORK/results`
//     there, with its stdin and stdout connected to the coordinator;
//  4. copies each transcript back as the worker reports it;
//  5. removes the machine when the shard ends, unless keep says otherwise.
func MachineRunner(create CreateMachine, p Params) Runner {
	keep := p.Keep
	if keep == "" {
		keep = KeepNever
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &machineRunner{create: create, keep: keep, logger: logger}
}

type machineRunner struct {
	create CreateMachine
	keep   string
	logger *slog.Logger
}

// StopGrace is how long a worker gets to end after its channel's stdin
// closes before it is stopped.
const StopGrace = 10 * time.Second

// copyBackTimeout bounds one copy of a transcript back to the coordinator.
const copyBackTimeout = 2 * time.Minute

func (r *machineRunner) RunShard(ctx context.Context, s Shard) (rep ShardReport, err error) {
	i := s.Bundle.Shard
	m, err := r.create(ctx, i)
	if err != nil {
		return rep, fmt.Errorf("shard %d: creating its machine: %w", i, err)
	}
	rep.Machine, rep.Image = m.ID(), m.Image()
	defer func() {
		if r.keep == KeepAlways || (r.keep == KeepFailed && err != nil) {
			r.logger.Info("keeping the machine", "shard", i, "machine", m.ID())
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if rerr := m.Remove(rctx); rerr != nil {
			r.logger.Warn("removing the machine failed", "shard", i, "machine", m.ID(), "err", rerr)
		}
	}()

	local, err := os.MkdirTemp("", "mst-bundle-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(local)
	b, err := json.Marshal(s.Bundle)
	if err != nil {
		return rep, err
	}
	if err := os.WriteFile(filepath.Join(local, BundleFile), b, 0o600); err != nil {
		return rep, err
	}
	work := m.WorkDir()
	bundleDir, resultsDir := path.Join(work, "bundle"), path.Join(work, "results")
	if err := m.CopyTo(ctx, local, bundleDir); err != nil {
		return rep, fmt.Errorf("shard %d: copying the bundle to %s: %w", i, m.ID(), err)
	}

	// The worker's context outlives ctx a little: a cancel reaches it as a
	// protocol message first, and only a worker that does not end within
	// StopGrace after its stdin closes is stopped.
	execCtx, stopExec := context.WithCancel(context.WithoutCancel(ctx))
	defer stopExec()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderr := &prefixWriter{logger: r.logger, shard: i}
	argv := append(append([]string(nil), m.MST()...), "collect", "--bundle", bundleDir, "--results", resultsDir)
	execDone := make(chan error, 1)
	go func() {
		err := m.Exec(execCtx, argv, stdinR, stdoutW, stderr)
		stdoutW.CloseWithError(io.EOF)
		stdinR.Close()
		execDone <- err
	}()
	fetch := func(ctx context.Context, p string) error {
		// A cancel must not stop the copy back: the trials it cancelled
		// still have transcripts to bring home, and a channel's copy (docker
		// cp, scp) ends with its context.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), copyBackTimeout)
		defer cancel()
		return m.CopyFrom(ctx, path.Join(resultsDir, p), filepath.Join(s.Results, filepath.FromSlash(p)))
	}
	res, serveErr := s.Serve(ctx, i, stdoutR, stdinW, fetch)
	rep.Result = res
	stdinW.Close()
	go io.Copy(io.Discard, stdoutR)
	var execErr error
	select {
	case execErr = <-execDone:
	case <-time.After(StopGrace):
		stopExec()
		execErr = <-execDone
	}
	stderr.flush()
	if serveErr != nil {
		return rep, serveErr
	}
	if execErr != nil && !errors.Is(execErr, context.Canceled) {
		r.logger.Warn("the worker exited with an error after it said done", "shard", i, "err", execErr)
	}
	return rep, nil
}

func (r *machineRunner) Close() error { return nil }

// prefixWriter passes a worker's stderr on to the coordinator's log, one
// line at a time, naming the shard.
type prefixWriter struct {
	logger *slog.Logger
	shard  int
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.logger.Warn(string(w.buf[:i]), "shard", w.shard, "from", "worker")
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *prefixWriter) flush() {
	if len(w.buf) > 0 {
		w.logger.Warn(string(w.buf), "shard", w.shard, "from", "worker")
		w.buf = nil
	}
}
