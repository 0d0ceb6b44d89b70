package shard_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/transcript"
)

// TestServeSilence checks that a worker that goes quiet is lost after
// exactly the silence period, counted from its last line (or from the
// start, when it never spoke), and not a nanosecond sooner.
func TestServeSilence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		silence time.Duration
		hello   bool
		want    time.Duration
	}{
		{"default after hello", 0, true, 60 * time.Second},
		{"default without hello", 0, false, 60 * time.Second},
		{"custom after hello", 15 * time.Second, true, 15 * time.Second},
		{"longer than default", 5 * time.Minute, true, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := &shard.Coordinator{MSTVersion: "test", Silence: tt.silence, Logger: discardLogger()}
				w := startServe(t, t.Context(), c, 0, nil)
				start := time.Now()
				if tt.hello {
					w.sendMsg(helloFrom("test", 0))
				}
				time.Sleep(tt.want - time.Nanosecond)
				synctest.Wait()
				if w.returned() {
					_, err := w.wait()
					t.Fatalf("Serve(Silence %s) returned %v after %s, want it still waiting", tt.silence, err, time.Since(start))
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if !w.returned() {
					t.Fatalf("Serve(Silence %s) still waiting after %s of silence, want ErrWorkerLost", tt.silence, time.Since(start))
				}
				_, err := w.wait()
				if !errors.Is(err, shard.ErrWorkerLost) {
					t.Errorf("Serve(Silence %s) = %v, want ErrWorkerLost", tt.silence, err)
				}
				if got := w.returnedAt.Sub(start); got != tt.want {
					t.Errorf("Serve(Silence %s) returned after %s, want %s", tt.silence, got, tt.want)
				}
			})
		})
	}
}

// TestServeHeartbeatsKeepSlowTrialAlive checks that a worker running one
// five-minute trial is not lost while it sends a heartbeat every 10 s, as
// Worker does (shard.HeartbeatEvery).
func TestServeHeartbeatsKeepSlowTrialAlive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &trialEvents{}
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil), Events: ev, Logger: discardLogger()}
		w := startServe(t, t.Context(), c, 0, nil)
		start := time.Now()
		key := transcript.Key{Case: "slow", Variant: "v", Trial: 1}
		w.sendMsg(helloFrom("test", 0))
		w.sendMsg(&protocol.Acquire{ID: 1, Key: key, Providers: []string{"anthropic"}})
		synctest.Wait()
		if got := w.granted(); len(got) != 1 {
			t.Fatalf("Serve granted %v after one acquire, want [1]", got)
		}
		for range 30 {
			time.Sleep(shard.HeartbeatEvery)
			synctest.Wait()
			if w.returned() {
				_, err := w.wait()
				t.Fatalf("Serve(heartbeat every %s) = %v after %s, want it still serving", shard.HeartbeatEvery, err, time.Since(start))
			}
			w.sendMsg(&protocol.Heartbeat{InFlight: 1, Done: 0})
		}
		w.sendMsg(&protocol.Trial{Acquire: 1, Key: key, Status: transcript.Answered, Path: "transcripts/v/slow.t1.json", DurationMs: 300000})
		w.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: 1, Answered: 1}, CleanupOK: true})
		res, err := w.wait()
		if err != nil {
			t.Fatalf("Serve(a five-minute trial with heartbeats) = %v, want no error", err)
		}
		if res.Done == nil || res.Done.Counts.Answered != 1 {
			t.Errorf("Serve(a five-minute trial with heartbeats).Done = %+v, want one answered", res.Done)
		}
		if got, want := w.returnedAt.Sub(start), 5*time.Minute; got != want {
			t.Errorf("Serve(a five-minute trial with heartbeats) returned after %s, want %s", got, want)
		}
		if got := ev.got(); len(got) != 1 || got[0].Key != key {
			t.Errorf("Serve(a five-minute trial with heartbeats) reported %v, want the one trial", got)
		}
	})
}

// TestServeLostAfterHeartbeatsStop checks that the silence period runs
// from the last heartbeat: a worker that stops sending them mid-trial is
// lost 60 s after the last one.
func TestServeLostAfterHeartbeatsStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &shard.Coordinator{MSTVersion: "test", Logger: discardLogger()}
		w := startServe(t, t.Context(), c, 0, nil)
		w.sendMsg(helloFrom("test", 0))
		w.sendMsg(&protocol.Acquire{ID: 1, Key: transcript.Key{Case: "c", Variant: "v", Trial: 1}})
		for range 6 {
			time.Sleep(shard.HeartbeatEvery)
			w.sendMsg(&protocol.Heartbeat{InFlight: 1})
		}
		last := time.Now()
		_, err := w.wait()
		if !errors.Is(err, shard.ErrWorkerLost) {
			t.Errorf("Serve(heartbeats that stop) = %v, want ErrWorkerLost", err)
		}
		if got, want := w.returnedAt.Sub(last), 60*time.Second; got != want {
			t.Errorf("Serve(heartbeats that stop) returned %s after the last heartbeat, want %s", got, want)
		}
	})
}
