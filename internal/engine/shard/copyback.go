package shard

import (
	"context"
	"log/slog"
	"sync"
)

// CopyConcurrency is how many files of one shard the coordinator copies
// back from the worker's machine at once.
const CopyConcurrency = 4

// CopyFailureLimit is how many copies in a row may fail before the
// coordinator stops the shard: a machine whose files cannot be read would
// otherwise keep running trials that can never come back.
const CopyFailureLimit = 3

// copier copies the files a worker reports (transcripts, grades) back
// from its machine while the coordinator's message loop goes on reading,
// so that a slow copy (docker cp, kubectl exec, an SSH hop) does not hold
// up the worker's next grant. At most CopyConcurrency copies run at once;
// their reports reach Events in the order the worker reported the trials.
type copier struct {
	c      *Coordinator
	fetch  Fetch
	ctx    context.Context
	logger *slog.Logger
	shard  int

	sem     chan struct{}
	queue   chan *copyJob
	emitted sync.WaitGroup
	// failed is closed once CopyFailureLimit copies in a row failed.
	failed chan struct{}
}

type copyJob struct {
	path, trial string
	report      func(data []byte)
	done        chan struct{}
	data        []byte
	ok          bool
}

func newCopier(ctx context.Context, c *Coordinator, fetch Fetch, logger *slog.Logger, shard int) *copier {
	cp := &copier{c: c, fetch: fetch, ctx: ctx, logger: logger, shard: shard,
		sem: make(chan struct{}, CopyConcurrency), queue: make(chan *copyJob, 1024), failed: make(chan struct{})}
	cp.emitted.Go(cp.emit)
	return cp
}

// add copies path back and then calls report with its bytes, after the
// reports of every file added before it; a copy that fails twice is
// logged and not reported (its trial stays missing).
func (cp *copier) add(path, trial string, report func(data []byte)) {
	job := &copyJob{path: path, trial: trial, report: report, done: make(chan struct{})}
	go func() {
		defer close(job.done)
		cp.sem <- struct{}{}
		defer func() { <-cp.sem }()
		job.data, job.ok = cp.c.fetch(cp.ctx, cp.fetch, path, cp.logger, cp.shard, trial)
	}()
	cp.queue <- job
}

func (cp *copier) emit() {
	fails := 0
	for job := range cp.queue {
		<-job.done
		if !job.ok {
			fails++
			if fails == CopyFailureLimit {
				close(cp.failed)
			}
			continue
		}
		fails = 0
		job.report(job.data)
	}
}

// wait returns once every file added has been copied and reported. No
// add may follow it.
func (cp *copier) wait() {
	close(cp.queue)
	cp.emitted.Wait()
}
