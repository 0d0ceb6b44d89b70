package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// fakeClient is a scriptable client: each trial's prompt says what the
// session does ("answer", "reset", "stop", "fail", "hang", "late-bad").
type fakeClient struct {
	mu                                     sync.Mutex
	opens, resets, closes, diagnoses, runs int
	concurrentMax, inFlight                int
	// params are what each Open was given, in order.
	params []client.OpenParams
	// hangEnds are the errors of the contexts "hang" trials ended on.
	hangEnds []error
	// ranOn maps each case run to the model of the session that ran it.
	ranOn map[string]string
}

func (f *fakeClient) definition(concurrent bool) *client.Definition {
	return &client.Definition{
		Name: "fake", Description: "a scriptable client for tests", Concurrent: concurrent,
		Options: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		Open: func(ctx context.Context, p client.OpenParams) (client.Session, error) {
			f.mu.Lock()
			f.opens++
			f.params = append(f.params, p)
			f.mu.Unlock()
			return &fakeSession{f: f, model: p.Model}, nil
		},
	}
}

type fakeSession struct {
	f *fakeClient
	// model is the model the session was opened with.
	model string
}

func (s *fakeSession) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	f := s.f
	f.mu.Lock()
	f.runs++
	if f.ranOn == nil {
		f.ranOn = map[string]string{}
	}
	f.ranOn[t.Key.Case] = s.model
	f.inFlight++
	f.concurrentMax = max(f.concurrentMax, f.inFlight)
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()
	answered := client.Result{Answer: "ok", Outcome: transcript.Outcome{Status: transcript.Answered}}
	switch t.Prompt {
	case "reset":
		answered.Next = client.Reset
	case "stop":
		answered.Next = client.Stop
	case "fail":
		return client.Result{}, errors.New("the app crashed")
	case "hang":
		<-ctx.Done()
		f.mu.Lock()
		f.hangEnds = append(f.hangEnds, ctx.Err())
		f.mu.Unlock()
		return client.Result{}, ctx.Err()
	}
	return answered, nil
}

func (s *fakeSession) Reset(context.Context) error {
	s.f.mu.Lock()
	s.f.resets++
	s.f.mu.Unlock()
	return nil
}

func (s *fakeSession) Close() error {
	s.f.mu.Lock()
	s.f.closes++
	s.f.mu.Unlock()
	return nil
}

func (s *fakeSession) Diagnose(context.Context) (map[string]any, error) {
	s.f.mu.Lock()
	s.f.diagnoses++
	s.f.mu.Unlock()
	return map[string]any{"window": "a dialog was open"}, nil
}

// oneSetting is a bundle of one setting (variant v of the fake client)
// with a case per prompt (id = prompt-letter) and a trial of each.
func oneSetting(prompts []string, concurrency int, timeout time.Duration) *shard.Bundle {
	b := &shard.Bundle{
		Run:         transcript.Run{ID: "r"},
		Settings:    []shard.Setting{{Variant: "v", Client: "fake", Model: "m", Timeout: timeout}},
		Concurrency: concurrency,
	}
	for i, p := range prompts {
		id := p + "-" + string(rune('a'+i))
		b.Cases = append(b.Cases, dataset.Case{ID: id, Input: p})
		b.Add(shard.Planned{Key: transcript.Key{Case: id, Variant: "v", Trial: 1}})
	}
	return b
}

// runShard runs cases (prompt = id) through the real worker and
// coordinator over pipes (runPipes), and returns the transcripts stored,
// by case.
func runShard(t *testing.T, def *client.Definition, prompts []string, concurrency int, timeout time.Duration) (map[string]*transcript.Transcript, shard.ShardResult) {
	t.Helper()
	dir := t.TempDir()
	b := oneSetting(prompts, concurrency, timeout)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	results := store.OpenDir(dir, nil)
	w := &shard.Worker{Clients: client.NewRegistry(def), Results: results, Logger: logger, MSTVersion: "test", WorkDir: t.TempDir()}
	ev := &trialEvents{}
	coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil), Events: ev, Logger: logger}
	res, err := runPipes(t.Context(), w, b, coord, nil)
	if err != nil {
		t.Fatalf("runPipes(%d trials): %v", len(prompts), err)
	}
	got := map[string]*transcript.Transcript{}
	for _, m := range ev.got() {
		tr, err := results.ReadTranscript(t.Context(), m.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(m.Path, "transcripts/") {
			t.Errorf("trial %s reported path %q, want one under transcripts/", m.Key, m.Path)
		}
		got[tr.Case] = tr
	}
	return got, res
}

// TestSessionLoop drives one non-concurrent session through continue,
// reset, stop, a client error and a timeout, and checks MST's one policy:
// reset when asked (and after errors and timeouts, after diagnosing), a new
// session after stop, every session closed at the end.
func TestSessionLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { testSessionLoop(t) })
}

func testSessionLoop(t *testing.T) {
	f := &fakeClient{}
	got, res := runShard(t, f.definition(false), []string{"answer", "reset", "answer", "stop", "answer", "fail", "hang", "answer"}, 1, 200*time.Millisecond)
	if res.Done == nil || res.Done.Counts.Answered != 6 || res.Done.Counts.Errored != 1 || res.Done.Counts.TimedOut != 1 || !res.Done.CleanupOK {
		t.Fatalf("done = %+v, want 6 answered, 1 errored, 1 timed out, clean", res.Done)
	}
	// Resets: after "reset", after "fail" and after "hang". Opens: the
	// first session, and a new one after "stop".
	if f.opens != 2 || f.resets != 3 || f.closes != 2 || f.diagnoses != 2 || f.runs != 8 {
		t.Errorf("opens %d resets %d closes %d diagnoses %d runs %d; want 2, 3, 2, 2, 8", f.opens, f.resets, f.closes, f.diagnoses, f.runs)
	}
	if tr := got["fail-f"]; tr.Outcome.Status != transcript.Errored || tr.Outcome.Cause != transcript.CauseClient || !strings.Contains(tr.Outcome.Detail, "the app crashed") {
		t.Errorf("fail: outcome %+v, want errored (client) with the message", tr.Outcome)
	}
	if tr := got["hang-g"]; tr.Outcome.Status != transcript.TimedOut || tr.ClientTelemetry["diagnosis"] == nil {
		t.Errorf("hang: outcome %+v telemetry %v, want timed-out with a diagnosis", tr.Outcome, tr.ClientTelemetry)
	}
	if tr := got["hang-g"]; tr.Timing.DurationMs != 200 {
		t.Errorf("hang: duration %vms, want the 200ms timeout", tr.Timing.DurationMs)
	}
}

// TestConcurrentSharedSession: a concurrent client gets one session for all
// trials in flight; a non-concurrent one gets one per trial in flight.
func TestConcurrentSharedSession(t *testing.T) {
	t.Parallel()
	prompts := []string{"answer", "answer", "answer", "answer", "answer", "answer"}
	shared := &fakeClient{}
	runShard(t, shared.definition(true), prompts, 3, 0)
	if shared.opens != 1 || shared.closes != 1 {
		t.Errorf("concurrent client: %d opens, %d closes, want 1 and 1", shared.opens, shared.closes)
	}
	single := &fakeClient{}
	runShard(t, single.definition(false), prompts, 3, 0)
	if single.opens < 1 || single.opens > 3 || single.closes != single.opens || single.concurrentMax > 3 {
		t.Errorf("non-concurrent client: %d opens, %d closes, %d at once; want 1..3 opens, all closed", single.opens, single.closes, single.concurrentMax)
	}
}

// TestRunOnlyClient wraps a client with only Run in a one-shot session.
func TestRunOnlyClient(t *testing.T) {
	t.Parallel()
	var calls int
	var mu sync.Mutex
	def := &client.Definition{Name: "fake", Options: json.RawMessage(`{}`),
		Run: func(ctx context.Context, p client.OpenParams, tr client.Trial) (client.Result, error) {
			mu.Lock()
			calls++
			mu.Unlock()
			return client.Result{Answer: tr.Prompt, Outcome: transcript.Outcome{Status: transcript.Answered}}, nil
		}}
	got, _ := runShard(t, def, []string{"one", "two"}, 2, 0)
	if calls != 2 || got["one-a"].Answer != "one" {
		t.Errorf("run-only client: %d calls, transcripts %v", calls, got)
	}
}
