package shard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/transcript"
)

// TestServeCopiesBesideTheLoop: while the first trial's transcript is
// still being copied back, Serve grants the worker's next acquires, copies
// the later transcripts, and reports every trial in the order the worker
// reported them, all before it returns.
func TestServeCopiesBesideTheLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &trialEvents{}
		c := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: discardLogger()}
		release := make(chan struct{})
		var mu sync.Mutex
		var inFlight, most int
		fetch := func(ctx context.Context, path string) ([]byte, error) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
			if strings.Contains(path, ".t1.") {
				<-release // the first copy is slow
			}
			return []byte(path), nil
		}
		w := startServe(t, t.Context(), c, 0, fetch)
		w.sendMsg(helloFrom("test", 0))
		const n = 8
		for i := 1; i <= n; i++ {
			key := transcript.Key{Case: "c", Variant: "v", Trial: i}
			w.sendMsg(&protocol.Acquire{ID: int64(i), Key: key})
			synctest.Wait()
			if g := w.granted(); len(g) != i {
				t.Fatalf("acquire %d: granted %v while trial 1's copy runs; want every acquire granted", i, g)
			}
			w.sendMsg(&protocol.Trial{Acquire: int64(i), Key: key, Status: transcript.Answered, Path: fmt.Sprintf("transcripts/v/c.t%d.json", i)})
		}
		synctest.Wait()
		if got := ev.got(); len(got) != 0 {
			t.Errorf("%d trials reported before trial 1's copy ended; want none (they come in order)", len(got))
		}
		close(release)
		w.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: n, Answered: n}, CleanupOK: true})
		if _, err := w.wait(); err != nil {
			t.Fatalf("Serve = %v", err)
		}
		got := ev.got()
		if len(got) != n {
			t.Fatalf("%d trials reported by the time Serve returned, want %d", len(got), n)
		}
		for i, m := range got {
			if m.Key.Trial != i+1 || string(ev.fetched()[i]) != fmt.Sprintf("transcripts/v/c.t%d.json", i+1) {
				t.Errorf("report %d is trial %d with %q; want trial %d, in order, with its own bytes", i+1, m.Key.Trial, ev.fetched()[i], i+1)
			}
		}
		if most < 2 || most > shard.CopyConcurrency {
			t.Errorf("at most %d copies ran at once, want between 2 and CopyConcurrency (%d)", most, shard.CopyConcurrency)
		}
	})
}

// TestServeStopsWhenCopiesKeepFailing: a machine whose transcripts cannot
// be copied back has its shard stopped after CopyFailureLimit failures in
// a row, with a cancel to the worker; a copy that works between failures
// starts the count again.
func TestServeStopsWhenCopiesKeepFailing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &trialEvents{}
		c := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: discardLogger()}
		fetch := func(ctx context.Context, path string) ([]byte, error) {
			if strings.Contains(path, "ok") {
				return []byte("{}"), nil
			}
			return nil, errors.New("the machine is gone")
		}
		w := startServe(t, t.Context(), c, 0, fetch)
		w.sendMsg(helloFrom("test", 0))
		// fail, fail, ok, then failures up to the limit.
		names := []string{"bad", "bad", "ok"}
		for range shard.CopyFailureLimit {
			names = append(names, "bad")
		}
		for i, name := range names {
			key := transcript.Key{Case: name, Variant: "v", Trial: i + 1}
			w.sendMsg(&protocol.Acquire{ID: int64(i + 1), Key: key})
			synctest.Wait() // the grant, before the report, as a worker waits for it
			w.sendMsg(&protocol.Trial{Acquire: int64(i + 1), Key: key, Status: transcript.Answered, Path: fmt.Sprintf("transcripts/v/%s.t%d.json", name, i+1)})
			synctest.Wait()
			if i < len(names)-1 && w.returned() {
				_, err := w.wait()
				t.Fatalf("Serve returned after %d reports (%v); want it to go on until %d failures in a row", i+1, err, shard.CopyFailureLimit)
			}
		}
		_, err := w.wait()
		if err == nil || !strings.Contains(err.Error(), "could not be copied back") {
			t.Errorf("Serve = %v, want the shard stopped for its copies", err)
		}
		var cancelled bool
		for _, m := range w.messages() {
			if _, ok := m.(*protocol.Cancel); ok {
				cancelled = true
			}
		}
		if !cancelled {
			t.Error("the worker got no cancel")
		}
		if got := ev.got(); len(got) != 1 || got[0].Key.Case != "ok" {
			t.Errorf("reported %+v, want the one trial whose copy worked", got)
		}
	})
}
