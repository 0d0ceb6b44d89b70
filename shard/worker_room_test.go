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
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/shard"
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
			Variants: []shard.Variant{{Name: "v", Client: "fake", Model: "anthropic/m", Provider: "anthropic"}},
			Cases:    []dataset.Case{{ID: "a", Input: "a"}, {ID: "b", Input: "b"}},
			Trials:   []transcript.Key{{Case: "a", Variant: "v", Trial: 1}, {Case: "b", Variant: "v", Trial: 1}},
		}
		local := &runner.Local{Worker: &shard.Worker{Clients: client.NewRegistry(def), Logger: discardLogger(), MSTVersion: "test", WorkDir: dir}}
		coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"anthropic": 1}, nil), Logger: discardLogger()}
		ctx, interrupt := context.WithCancel(t.Context())
		defer interrupt()
		type ended struct {
			rep runner.ShardReport
			err error
		}
		end := make(chan ended, 1)
		go func() {
			rep, err := local.RunShard(ctx, runner.Shard{Bundle: b, Results: results, Serve: coord.Serve})
			end <- ended{rep, err}
		}()
		var got ended
		select {
		case got = <-end:
		case <-time.After(10 * time.Minute):
			t.Errorf("RunShard(2 trials, anthropic: 1, transcripts not writable) still running after 10 minutes, want done: the first trial kept its room and the second waits for it")
			interrupt()
			got = <-end
		}
		if d := got.rep.Result.Done; d == nil || d.Counts.Planned != 2 || d.Counts.Missing != 2 {
			t.Errorf("RunShard(2 trials, transcripts not writable) done = %+v (err %v), want 2 planned, 2 missing", d, got.err)
		}
	})
}
