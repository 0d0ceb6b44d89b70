package shard_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestWorkerGivesRoomBackWhenWriteFails runs two trials through the real
// worker and coordinator under a limit of one anthropic trial at a time,
// with a run folder no transcript can be written to. Each trial must give
// its room back even though its transcript was not written; otherwise the
// second trial waits for room forever while heartbeats keep the shard
// from being declared lost, and every other shard under the same limit
// stalls with it.
func TestWorkerGivesRoomBackWhenWriteFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		// A file where the run folder should be: every write under it fails.
		results := filepath.Join(dir, "results")
		if err := os.WriteFile(results, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		def := &client.Definition{Name: "fake", Options: json.RawMessage(`{}`),
			Run: func(ctx context.Context, p client.OpenParams, tr client.Trial) (client.Result, error) {
				return client.Result{Answer: "ok", Outcome: transcript.Outcome{Status: transcript.Answered}}, nil
			}}
		b := &shard.Bundle{
			Run:      transcript.Run{ID: "r"},
			Settings: []shard.Setting{{Variant: "v", Client: "fake", Model: "anthropic/m", Provider: "anthropic"}},
			Cases:    []dataset.Case{{ID: "a", Input: "a"}, {ID: "b", Input: "b"}},
			Series:   shard.SeriesOf(shard.Planned{Key: transcript.Key{Case: "a", Variant: "v", Trial: 1}}, shard.Planned{Key: transcript.Key{Case: "b", Variant: "v", Trial: 1}}),
		}
		w := &shard.Worker{Clients: client.NewRegistry(def), Results: store.OpenDir(results, nil), Logger: discardLogger(), MSTVersion: "test", WorkDir: dir}
		coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"anthropic": 1}, nil), Logger: discardLogger()}
		got := runPipesWithin(t, 10*time.Minute, w, b, coord, nil)
		if d := got.res.Done; d == nil || d.Counts.Planned != 2 || d.Counts.Missing != 2 {
			t.Errorf("runPipes(2 trials, transcripts not writable) done = %+v (err %v), want 2 planned, 2 missing", d, got.err)
		}
	})
}

// ended is what runPipes returned.
type ended struct {
	res shard.ShardResult
	err error
}

// runPipesWithin runs runPipes inside a synctest bubble and fails the test
// when the shard is still running after d of (fake) time: heartbeats keep
// a stalled shard from being lost, so a stall shows only as time passing.
// The stalled run is then interrupted, and what it returned is returned.
func runPipesWithin(t *testing.T, d time.Duration, w *shard.Worker, b *shard.Bundle, coord *shard.Coordinator, fetch shard.Fetch) ended {
	t.Helper()
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	end := make(chan ended, 1)
	go func() {
		res, err := runPipes(ctx, w, b, coord, fetch)
		end <- ended{res, err}
	}()
	select {
	case got := <-end:
		return got
	case <-time.After(d):
		t.Errorf("runPipes(%d trials) still running after %s, want done: a trial waits for room another kept", b.Size(), d)
		interrupt()
		return <-end
	}
}
