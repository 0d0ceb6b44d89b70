package run

import (
	"context"
	"sync"

	"github.com/mst-eval/mst/transcript"
)

// judgeQueue holds the trials of a run that wait for a judge, and grades
// them with at most grading.workers goroutines (started as they are
// needed, gone when the queue is empty). Judges wait on models, so trials
// may come back faster than they are judged, for as long as a run lasts;
// the queue must not then hold what it waits on: it keeps the first
// judgeQueueHeld transcripts it is given, and only the key of the rest,
// whose transcripts it reads back from the store when their turn comes.
// The wait of 100,000 trials for a slow judge costs a few megabytes, not a
// transcript and a goroutine each.
type judgeQueue struct {
	mu      sync.Mutex
	items   []judgeItem
	held    int // items that hold their transcript
	running int // goroutines grading
	done    sync.WaitGroup
}

// judgeItem is a trial waiting for its judge: its transcript, or only its
// key.
type judgeItem struct {
	key transcript.Key
	t   *transcript.Transcript
}

// judgeQueueHeld bounds the transcripts the queue holds.
const judgeQueueHeld = 64

// add queues t for grading by c.
func (q *judgeQueue) add(ctx context.Context, c *collector, t *transcript.Transcript) {
	q.mu.Lock()
	defer q.mu.Unlock()
	it := judgeItem{key: t.Key}
	if q.held < judgeQueueHeld {
		it.t = t
		q.held++
	}
	q.items = append(q.items, it)
	if q.running < max(c.grading.workers, 1) {
		q.running++
		q.done.Go(func() { q.drain(ctx, c) })
	}
}

// drain grades queued trials until the queue is empty.
func (q *judgeQueue) drain(ctx context.Context, c *collector) {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.running--
			q.items = nil // let the emptied array go
			q.mu.Unlock()
			return
		}
		it := q.items[0]
		q.items[0] = judgeItem{}
		q.items = q.items[1:]
		if it.t != nil {
			q.held--
		}
		q.mu.Unlock()
		t := it.t
		if t == nil {
			var err error
			if t, err = c.st.ReadTranscript(ctx, it.key); err != nil {
				// Gathering grades it once the run's trials are in.
				c.logger.Warn("reading a transcript back for its judge failed; it is graded at the end", "trial", it.key.String(), "err", err)
				continue
			}
		}
		c.gradeTrial(ctx, t)
	}
}

// wait waits until every queued trial is graded.
func (q *judgeQueue) wait() { q.done.Wait() }
