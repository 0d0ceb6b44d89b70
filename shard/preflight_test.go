package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/store"
)

// TestPreflightOnTheWorker: a worker checks what each client needs on its
// own machine (an installed CLI) before any trial, since the coordinator
// could check only its own: a missing program fails the readiness check,
// naming the variant and the fix, and no session opens.
func TestPreflightOnTheWorker(t *testing.T) {
	t.Parallel()
	var opens atomic.Int32
	def := &client.Definition{
		Name: "fake", Options: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		Preflight: func(json.RawMessage) error {
			return errors.New("the Fake CLI is not installed: run npm install -g fake-cli")
		},
		Open: func(ctx context.Context, p client.OpenParams) (client.Session, error) {
			opens.Add(1)
			return nil, errors.New("must not open")
		},
	}
	b := oneSetting([]string{"one"}, 1, time.Minute)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &shard.Worker{Clients: client.NewRegistry(def), Results: store.OpenDir(t.TempDir(), nil), Logger: logger, MSTVersion: "test", WorkDir: t.TempDir()}
	ev := &trialEvents{}
	coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil), Events: ev, Logger: logger}
	_, err := runPipes(t.Context(), w, b, coord, nil)
	if err == nil || !strings.Contains(err.Error(), "readiness check failed") || !strings.Contains(err.Error(), "npm install -g fake-cli") {
		t.Errorf("runPipes = %v; want the readiness check to fail with the client's preflight error", err)
	}
	if n := opens.Load(); n != 0 || len(ev.got()) != 0 {
		t.Errorf("%d sessions opened and %d trials ran on a machine without the client's program", n, len(ev.got()))
	}
}
