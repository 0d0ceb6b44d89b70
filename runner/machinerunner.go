package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// MachineRunner builds a whole runner from a function that creates one
// machine per shard. For each shard it:
//
//  1. creates the machine;
//  2. copies the shard's bundle folder to WORK/bundle on the machine;
//  3. starts `mst collect --bundle WORK/bundle --results WORK/results`
//     there (`mst grade-shard` for a shard that grades), with its stdin
//     and stdout connected to the coordinator;
//  4. brings back each file the coordinator fetches (CopyFrom into a
//     temporary file, read and removed);
//  5. once Serve returns, closes the worker's stdin and gives it
//     p.StopGrace to end before its command is stopped;
//  6. removes the machine, unless keep says otherwise.
func MachineRunner(create CreateMachine, p Params) Runner {
	keep := p.Keep
	if keep == "" {
		keep = KeepNever
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &machineRunner{create: create, keep: keep, logger: logger, grace: p.Grace(), heartbeat: p.Heartbeat}
}

type machineRunner struct {
	create    CreateMachine
	keep      string
	logger    *slog.Logger
	grace     time.Duration
	heartbeat time.Duration
}

// removeTimeout bounds the removal of a machine after its shard.
const removeTimeout = 2 * time.Minute

func (r *machineRunner) RunShard(ctx context.Context, s Shard) (rep ShardReport, err error) {
	i := s.Index
	m, err := r.create(ctx, i)
	if err != nil {
		return rep, fmt.Errorf("shard %d: creating its machine: %w", i, err)
	}
	rep.Machine, rep.Image = m.ID(), m.Image()
	defer func() {
		if r.keep == KeepAlways || (r.keep == KeepFailed && err != nil) {
			r.logger.Info("keeping the machine", "shard", i, "machine", m.ID())
			rep.Kept = true
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		if rerr := m.Remove(rctx); rerr != nil {
			r.logger.Warn("removing the machine failed", "shard", i, "machine", m.ID(), "err", rerr)
		}
	}()

	work := m.WorkDir()
	bundleDir, resultsDir := path.Join(work, "bundle"), path.Join(work, "results")
	if err := m.CopyTo(ctx, s.BundleDir, bundleDir); err != nil {
		return rep, fmt.Errorf("shard %d: copying the bundle to %s: %w", i, m.ID(), err)
	}
	fetched, err := TempFolder("mst-fetch-", s.Run)
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(fetched)

	// The worker's context outlives ctx a little: a cancel reaches it as a
	// protocol message first, and only a worker that does not end within
	// the grace after its stdin closes is stopped.
	execCtx, stopExec := context.WithCancel(context.WithoutCancel(ctx))
	defer stopExec()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderr := &prefixWriter{logger: r.logger, shard: i}
	command := "collect"
	if s.Work == "grade" {
		command = "grade-shard"
	}
	argv := append(append([]string(nil), m.MST()...), command, "--bundle", bundleDir, "--results", resultsDir)
	if r.heartbeat > 0 {
		argv = append(argv, "--heartbeat", r.heartbeat.String())
	}
	execDone := make(chan error, 1)
	go func() {
		err := m.Exec(execCtx, argv, stdinR, stdoutW, stderr)
		stdoutW.CloseWithError(io.EOF)
		stdinR.Close()
		execDone <- err
	}()
	var n atomic.Int64
	// One file server per shard brings the transcripts back
	// (fileserver.go), unless copying is cheap already.
	var files *fileClient
	if cc, ok := m.(CheapCopies); !ok || !cc.CopiesCheaply() {
		files = &fileClient{m: m, root: resultsDir, execCtx: execCtx, stderr: &prefixWriter{logger: r.logger, shard: i}}
		defer files.close()
	}
	fetch := func(ctx context.Context, p string) ([]byte, error) {
		// The path comes from the worker: it must stay in its results
		// (runner/fetch.go).
		if err := checkFetchPath(p); err != nil {
			return nil, err
		}
		if files != nil {
			if b, ok, err := files.fetch(ctx, p); ok {
				return b, err
			}
		}
		// Each copy gets a file of its own: fetches may run at once.
		local := filepath.Join(fetched, strconv.FormatInt(n.Add(1), 10))
		defer os.RemoveAll(local)
		if err := m.CopyFrom(ctx, path.Join(resultsDir, p), local); err != nil {
			return nil, err
		}
		return readFetched(local)
	}
	serveErr := s.Serve(ctx, stdoutR, stdinW, fetch)
	stdinW.Close()
	go io.Copy(io.Discard, stdoutR)
	var execErr error
	grace := time.NewTimer(r.grace)
	defer grace.Stop()
	select {
	case execErr = <-execDone:
	case <-grace.C:
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
