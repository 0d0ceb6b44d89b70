package shard_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// deafSession ignores its trial's context: Run returns only when released
// is closed, as a client stuck in a call that takes no context would.
type deafSession struct {
	released <-chan struct{}
	closed   *atomic.Int32
}

func (s *deafSession) Run(ctx context.Context, tr client.Trial) (client.Result, error) {
	<-s.released
	return client.Result{Answer: "too late", Outcome: transcript.Outcome{Status: transcript.Answered}}, nil
}
func (s *deafSession) Reset(context.Context) error { return nil }
func (s *deafSession) Close() error                { s.closed.Add(1); return nil }

// TestAbandonDeafClient: a client that ignores the end of its trial cannot
// hang the shard. Its trial ends timed-out once the grace after the timeout
// has passed, saying so, its session is closed, and the next trial gets a
// fresh session.
func TestAbandonDeafClient(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		released := make(chan struct{})
		var opens, closed atomic.Int32
		def := &client.Definition{
			Name: "fake", Options: json.RawMessage(`{"type":"object","additionalProperties":false}`),
			Open: func(ctx context.Context, p client.OpenParams) (client.Session, error) {
				opens.Add(1)
				return &deafSession{released: released, closed: &closed}, nil
			},
		}
		dir := t.TempDir()
		b := oneSetting([]string{"one", "two"}, 1, time.Minute)
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		results := store.OpenDir(dir, nil)
		w := &shard.Worker{Clients: client.NewRegistry(def), Results: results, Logger: logger, MSTVersion: "test", WorkDir: t.TempDir(), AbandonGrace: 10 * time.Second}
		ev := &trialEvents{}
		coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil), Events: ev, Logger: logger}
		if _, err := runPipes(t.Context(), w, b, coord, nil); err != nil {
			t.Fatalf("runPipes: %v", err)
		}
		got := ev.got()
		if len(got) != 2 {
			t.Fatalf("%d trials reported, want 2", len(got))
		}
		for _, m := range got {
			tr, err := results.ReadTranscript(t.Context(), m.Key)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Outcome.Status != transcript.TimedOut || !strings.Contains(tr.Outcome.Detail, "did not stop within 10s") {
				t.Errorf("trial %s: outcome %+v, want timed-out saying the client did not stop within the grace", m.Key, tr.Outcome)
			}
			if tr.Answer != "" {
				t.Errorf("trial %s: answer %q, want nothing read from an abandoned session", m.Key, tr.Answer)
			}
		}
		if n := opens.Load(); n != 2 {
			t.Errorf("%d sessions opened, want 2: an abandoned session is never used again", n)
		}
		close(released)
		synctest.Wait()
		if n := closed.Load(); n != 2 {
			t.Errorf("%d sessions closed, want both", n)
		}
	})
}
