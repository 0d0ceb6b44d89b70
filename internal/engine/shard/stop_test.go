package shard_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// variantGate is a shard.Gate that skips the trials of the variants it was
// told to stop, and counts what it was asked.
type variantGate struct {
	mu      sync.Mutex
	stopped map[string]string // variant → reason
	asked   int
}

func (g *variantGate) Admit(key transcript.Key) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	return g.stopped[key.Variant]
}

func (g *variantGate) stop(variant, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped == nil {
		g.stopped = map[string]string{}
	}
	g.stopped[variant] = reason
}

// TestGateSkipsTrials runs a real worker against a coordinator whose gate
// skips every trial of variant "stopped". The only room for provider p is
// held by a trial of variant "runs" that hangs until the run is cancelled;
// the skipped trials, which use p too, are still answered at once, because
// a skip takes no room. Each skipped trial opens no client, has a
// transcript that says skipped and why, with no usage, and is reported
// like any other trial.
func TestGateSkipsTrials(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const reason = "variant stopped stopped: a test said so"
		f := &fakeClient{}
		b := &shard.Bundle{
			Run: transcript.Run{ID: "r"},
			Settings: []shard.Setting{
				{Variant: "runs", Client: "fake", Model: "m1", Provider: "p"},
				{Variant: "stopped", Client: "fake", Model: "m2", Provider: "p"},
			},
			Concurrency: 2,
			Cases:       []dataset.Case{{ID: "hang", Input: "hang"}, {ID: "a", Input: "answer"}, {ID: "b", Input: "answer"}},
		}
		b.Add(shard.Planned{Key: transcript.Key{Case: "hang", Variant: "runs", Trial: 1}, Setting: 0})
		var skipped []transcript.Key
		for _, id := range []string{"a", "b"} {
			for trial := 1; trial <= 2; trial++ {
				k := transcript.Key{Case: id, Variant: "stopped", Trial: trial}
				skipped = append(skipped, k)
				b.Add(shard.Planned{Key: k, Setting: 1})
			}
		}
		results := store.OpenDir(t.TempDir(), nil)
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		w := &shard.Worker{Clients: client.NewRegistry(f.definition(false)), Results: results, Logger: logger, MSTVersion: "test", WorkDir: t.TempDir()}
		gate := &variantGate{}
		gate.stop("stopped", reason)
		ev := &trialEvents{}
		coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"p": 1}, nil), Events: ev, Logger: logger, Gate: gate}

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		type served struct {
			res shard.ShardResult
			err error
		}
		done := make(chan served, 1)
		go func() {
			res, err := runPipes(ctx, w, b, coord, nil)
			done <- served{res, err}
		}()
		synctest.Wait()
		// The hanging trial holds p's only room; every skipped trial has
		// been answered and reported all the same.
		got := ev.got()
		if len(got) != len(skipped) {
			t.Errorf("with p's only room held, %d trials were reported, want the %d skipped ones", len(got), len(skipped))
		}
		for _, m := range got {
			if m.Key.Variant != "stopped" || m.Status != transcript.Skipped || m.Path == "" || m.Acquire == 0 {
				t.Errorf("reported %+v, want a skipped trial of variant stopped with its acquire and transcript path", m)
			}
		}
		f.mu.Lock()
		opens, runs := f.opens, f.runs
		f.mu.Unlock()
		if opens != 1 || runs != 1 {
			t.Errorf("the client was opened %d times and ran %d trials, want 1 and 1 (only the variant that runs)", opens, runs)
		}
		for _, k := range skipped {
			tr, err := results.ReadTranscript(t.Context(), k)
			if err != nil {
				t.Errorf("ReadTranscript(%s) = %v, want the skipped trial's transcript", k, err)
				continue
			}
			if tr.Outcome != (transcript.Outcome{Status: transcript.Skipped, Detail: reason}) {
				t.Errorf("%s: outcome %+v, want skipped with the gate's reason", k, tr.Outcome)
			}
			if tr.Usage != (transcript.Usage{}) || len(tr.Messages) != 0 || tr.Client.Name != "fake" || tr.Model != "m2" || tr.Prompt != "answer" || tr.Run != "r" {
				t.Errorf("%s: transcript %+v, want no usage or messages, with the client, model, prompt and run", k, tr)
			}
		}

		cancel()
		s := <-done
		if s.err != nil {
			t.Fatalf("runPipes = %v, want no error", s.err)
		}
		want := transcript.Counts{Planned: 5, Cancelled: 1, Skipped: 4}
		if s.res.Done == nil || s.res.Done.Counts != want {
			t.Errorf("done = %+v, want counts %+v", s.res.Done, want)
		}
	})
}

// TestGateAskedAgainAfterWaiting: an acquire that waits for room is asked
// about again once it finds room, so a variant stopped meanwhile does not
// start; the room it found goes straight back, and the next acquire, of
// another variant, gets it.
func TestGateAskedAgainAfterWaiting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gate := &variantGate{}
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"p": 1}, nil), Logger: discardLogger(), Gate: gate}
		w := startServe(t, t.Context(), c, 0, nil)
		w.sendMsg(helloFrom("test", 0))
		key := func(variant, id string) transcript.Key { return transcript.Key{Case: id, Variant: variant, Trial: 1} }
		w.sendMsg(&protocol.Acquire{ID: 1, Key: key("v", "a"), Providers: []string{"p"}})
		w.sendMsg(&protocol.Acquire{ID: 2, Key: key("v", "b"), Providers: []string{"p"}})
		synctest.Wait()
		if got := grants(w); len(got) != 1 || got[0] != (protocol.Granted{ID: 1}) {
			t.Fatalf("grants %v, want only acquire 1 granted (p allows one trial)", got)
		}
		gate.stop("v", "stopped by the test")
		w.sendMsg(&protocol.Trial{Acquire: 1, Key: key("v", "a"), Status: transcript.Errored, Cause: transcript.CauseProvider, Path: "transcripts/v/a.t1.json"})
		synctest.Wait()
		w.sendMsg(&protocol.Acquire{ID: 3, Key: key("w", "c"), Providers: []string{"p"}})
		synctest.Wait()
		got := grants(w)
		want := []protocol.Granted{{ID: 1}, {ID: 2, Skip: "stopped by the test"}, {ID: 3}}
		if len(got) != len(want) {
			t.Fatalf("grants %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("grant %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		w.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: 3, Errored: 1, Skipped: 1, Missing: 1}, CleanupOK: true})
		if _, err := w.wait(); err != nil {
			t.Errorf("Serve = %v, want no error", err)
		}
	})
}

// TestGrantedSkipOnTheWire pins the skip field's name, and that a grant
// without one is written as before.
func TestGrantedSkipOnTheWire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    protocol.Granted
		want string
	}{
		{protocol.Granted{ID: 4}, `{"type":"granted","id":4}`},
		{protocol.Granted{ID: 5, Skip: "why"}, `{"type":"granted","id":5,"skip":"why"}`},
	} {
		var buf strings.Builder
		if err := protocol.NewEncoder(&buf).Write(&tc.m); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(buf.String()); got != tc.want {
			t.Errorf("Write(%+v) = %s, want %s", tc.m, got, tc.want)
		}
	}
}

// grants returns the granted messages the worker received, in order.
func grants(w *pipeWorker) []protocol.Granted {
	var out []protocol.Granted
	for _, m := range w.messages() {
		if g, ok := m.(*protocol.Granted); ok {
			out = append(out, *g)
		}
	}
	return out
}
