package shard_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/transcript"
)

// grantRef names one grant: the shard it went to and its acquire ID.
type grantRef struct {
	shard int
	id    int64
}

// TestLimiterAcrossShards serves two workers with one Coordinator whose
// limiter allows two anthropic trials at once. Each worker asks for room
// for three trials at once. At no time are more than two grants
// outstanding across both shards, and each trial report gives its room
// back to whichever acquire waits.
//
// The test counts outstanding grants as a worker sees them: granted
// messages received minus trial messages sent. Between two checks the
// test sends at most one trial (first) and then only receives grants, so
// the count can only grow after the send and its largest value is the one
// checked once the bubble settles.
func TestLimiterAcrossShards(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const limit, perShard = 2, 3
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"anthropic": limit}, nil), Logger: discardLogger()}
		workers := []*pipeWorker{startServe(t, t.Context(), c, 0, nil), startServe(t, t.Context(), c, 1, nil)}
		key := func(index int, id int64) transcript.Key {
			return transcript.Key{Case: fmt.Sprintf("case-%d-%d", index, id), Variant: "v", Trial: 1}
		}
		for i, w := range workers {
			w.sendMsg(helloFrom("test", i))
		}
		for id := int64(1); id <= perShard; id++ {
			for i, w := range workers {
				w.sendMsg(&protocol.Acquire{ID: id, Key: key(i, id), Providers: []string{"anthropic"}})
			}
		}
		reported := map[grantRef]bool{}
		total := len(workers) * perShard
		for {
			synctest.Wait()
			var outstanding []grantRef
			for i, w := range workers {
				ids := w.granted()
				if dup := duplicate(ids); dup != 0 {
					t.Fatalf("shard %d got granted %d twice (grants %v)", i, dup, ids)
				}
				for _, id := range ids {
					if g := (grantRef{i, id}); !reported[g] {
						outstanding = append(outstanding, g)
					}
				}
			}
			want := min(limit, total-len(reported))
			if len(outstanding) != want {
				t.Fatalf("NewLimiter(anthropic: %d) with %d of %d trials reported: %d grants outstanding across both shards %v, want %d",
					limit, len(reported), total, len(outstanding), outstanding, want)
			}
			if len(outstanding) == 0 {
				break
			}
			g := outstanding[0]
			workers[g.shard].sendMsg(&protocol.Trial{Acquire: g.id, Key: key(g.shard, g.id), Status: transcript.Answered, Path: "transcripts/v/x.t1.json"})
			reported[g] = true
		}
		for i, w := range workers {
			w.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: perShard, Answered: perShard}, CleanupOK: true})
			if _, err := w.wait(); err != nil {
				t.Errorf("Serve(shard %d) = %v, want no error", i, err)
			}
			if got := w.granted(); len(got) != perShard {
				t.Errorf("shard %d got grants %v, want one for each of its %d acquires", i, got, perShard)
			}
		}
	})
}

// TestLimiterRoomOfEndedShard checks that the room a shard holds when it
// ends without reporting its trials (its channel dropped) goes back to the
// limiter, so another shard's waiting acquire is granted.
func TestLimiterRoomOfEndedShard(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"anthropic": 2}, nil), Logger: discardLogger()}
		lost, waiting := startServe(t, t.Context(), c, 0, nil), startServe(t, t.Context(), c, 1, nil)
		lost.sendMsg(helloFrom("test", 0))
		waiting.sendMsg(helloFrom("test", 1))
		for id := int64(1); id <= 2; id++ {
			lost.sendMsg(&protocol.Acquire{ID: id, Key: transcript.Key{Case: fmt.Sprint("lost-", id), Variant: "v", Trial: 1}, Providers: []string{"anthropic"}})
		}
		synctest.Wait()
		if got := lost.granted(); len(got) != 2 {
			t.Fatalf("shard 0 got grants %v for two acquires under a cap of two, want both", got)
		}
		waiting.sendMsg(&protocol.Acquire{ID: 1, Key: transcript.Key{Case: "waiting", Variant: "v", Trial: 1}, Providers: []string{"anthropic"}})
		synctest.Wait()
		if got := waiting.granted(); len(got) != 0 {
			t.Fatalf("shard 1 got grants %v while shard 0 held all the room, want none", got)
		}
		lost.closeStdout()
		if _, err := lost.wait(); !errors.Is(err, shard.ErrWorkerLost) {
			t.Errorf("Serve(shard 0, channel closed) = %v, want ErrWorkerLost", err)
		}
		synctest.Wait()
		if got := waiting.granted(); !slices.Equal(got, []int64{1}) {
			t.Errorf("shard 1 got grants %v after shard 0 was lost holding the room, want [1]", got)
		}
		waiting.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: 1, Missing: 1}, CleanupOK: true})
		if _, err := waiting.wait(); err != nil {
			t.Errorf("Serve(shard 1) = %v, want no error", err)
		}
	})
}

// TestLimiterUncappedNames checks that a provider or server without a cap
// never waits, even while a capped one is full.
func TestLimiterUncappedNames(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"anthropic": 1}, nil), Logger: discardLogger()}
		w := startServe(t, t.Context(), c, 0, nil)
		w.sendMsg(helloFrom("test", 0))
		acquires := []*protocol.Acquire{
			{ID: 1, Providers: []string{"anthropic"}},
			{ID: 2, Providers: []string{"anthropic"}},
			{ID: 3, Providers: []string{"openai"}, Servers: []string{"weather"}},
			{ID: 4},
		}
		for _, a := range acquires {
			a.Key = transcript.Key{Case: fmt.Sprint("c", a.ID), Variant: "v", Trial: 1}
			w.sendMsg(a)
			synctest.Wait()
		}
		got := w.granted()
		slices.Sort(got)
		if want := []int64{1, 3, 4}; !slices.Equal(got, want) {
			t.Errorf("NewLimiter(anthropic: 1) granted %v, want %v (the second anthropic trial waits)", got, want)
		}
		w.sendMsg(&protocol.Done{CleanupOK: true})
		if _, err := w.wait(); err != nil {
			t.Errorf("Serve = %v, want no error", err)
		}
	})
}

// duplicate returns an ID that appears twice in ids, or 0.
func duplicate(ids []int64) int64 {
	seen := map[int64]bool{}
	for _, id := range ids {
		if seen[id] {
			return id
		}
		seen[id] = true
	}
	return 0
}
