package shard_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
)

// markerBundle is a one-trial bundle whose only server, when started,
// writes a line to the file marker and exits (so a readiness check of it
// fails at once, after it started).
func markerBundle(t *testing.T) (b *shard.Bundle, marker string) {
	marker = filepath.Join(t.TempDir(), "started")
	b = oneSetting([]string{"answer"}, 1, 0)
	b.Settings[0].Servers = []servers.Server{{Name: "marker", Command: "/bin/sh", Args: []string{"-c", `echo started >> "$0"`, marker}}}
	return b, marker
}

func started(t *testing.T, marker string) bool {
	t.Helper()
	_, err := os.Stat(marker)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestWorkerRefusedAtHelloStartsNothing checks the worker's side of a
// refused hello: it starts no server until the coordinator accepted its
// hello (the first tokens message), and a cancel or a closed stdin instead
// ends it with done carrying the reason, no server started. The control
// case checks that the server does start once tokens come.
func TestWorkerRefusedAtHelloStartsNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// answer is what the coordinator does after reading hello: a
		// message to send, or nil to close the worker's stdin.
		answer   any
		accepted bool
		reason   string
	}{
		{name: "version mismatch", answer: &protocol.Cancel{Reason: shard.ReasonVersionMismatch}, reason: "version mismatch"},
		{name: "machine refused", answer: &protocol.Cancel{Reason: shard.ReasonRefused}, reason: shard.ReasonRefused},
		{name: "stdin closed", answer: nil, reason: "channel closed"},
		{name: "accepted", answer: &protocol.Tokens{}, accepted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b, marker := markerBundle(t)
				w := fakeWorker(t, &fakeClient{}, false, store.OpenDir(t.TempDir(), nil))
				toWorker, fromTest := io.Pipe()
				fromWorker, toTest := io.Pipe()
				ran := make(chan error, 1)
				go func() {
					err := w.Run(t.Context(), b, toWorker, toTest)
					toTest.Close()
					ran <- err
				}()
				msgs := make(chan any, 64)
				go func() {
					defer close(msgs)
					dec := protocol.NewDecoder(fromWorker)
					for {
						m, err := dec.Read()
						if err != nil {
							return
						}
						if _, ok := m.(*protocol.Heartbeat); !ok {
							msgs <- m
						}
					}
				}()
				if _, ok := (<-msgs).(*protocol.Hello); !ok {
					t.Fatal("the worker's first message is not hello")
				}
				// Everything the worker does before an answer is done now.
				synctest.Wait()
				if started(t, marker) {
					t.Error("the worker started a server before the coordinator accepted its hello")
				}
				if tt.answer == nil {
					fromTest.Close()
				} else if err := protocol.NewEncoder(fromTest).Write(tt.answer); err != nil {
					t.Fatal(err)
				}
				err := <-ran
				fromTest.Close()
				var done *protocol.Done
				for m := range msgs {
					if d, ok := m.(*protocol.Done); ok {
						done = d
					}
				}
				if tt.accepted {
					if !started(t, marker) {
						t.Error("the worker started no server once accepted; the marker server cannot show a refusal")
					}
					return
				}
				if started(t, marker) {
					t.Errorf("the worker refused with %q started a server", tt.reason)
				}
				if err == nil || !strings.Contains(err.Error(), "did not accept") || !strings.Contains(err.Error(), tt.reason) {
					t.Errorf("Run(refused: %s) = %v, want an error saying the coordinator did not accept it, with %q", tt.name, err, tt.reason)
				}
				if done == nil || done.Error == "" || done.Counts.Missing != b.Size() {
					t.Errorf("Run(refused: %s) sent done %+v, want one with an error and every trial missing", tt.name, done)
				}
			})
		})
	}
}

// TestCoordinatorRefusesMachine checks CheckHello end to end: a machine
// it refuses gets a cancel instead of tokens, its worker starts no server,
// and the shard fails (not lost) with the check's message.
func TestCoordinatorRefusesMachine(t *testing.T) {
	t.Parallel()
	b, marker := markerBundle(t)
	w := fakeWorker(t, &fakeClient{}, false, store.OpenDir(t.TempDir(), nil))
	var asked []string
	c := fakeCoordinator(&trialEvents{})
	c.MSTVersion = "test"
	c.Bundles = []*shard.Bundle{b}
	c.CheckHello = func(got *shard.Bundle, h *protocol.Hello) error {
		if got != b {
			t.Errorf("CheckHello got bundle %p, want the shard's %p", got, b)
		}
		asked = append(asked, h.OS)
		return errors.New("variants.v.client: client fake runs on plan9; this run's machine is " + h.OS)
	}
	res, err := runPipes(t.Context(), w, b, c, nil)
	if err == nil || !strings.Contains(err.Error(), "runs on plan9") || errors.Is(err, shard.ErrWorkerLost) {
		t.Errorf("Serve(a machine CheckHello refuses) = %v, want a failure (not lost) with the check's message", err)
	}
	if len(asked) != 1 {
		t.Errorf("CheckHello was asked %d times, want once", len(asked))
	}
	if res.Hello == nil {
		t.Error("Serve kept no hello of the refused machine; run.json records its OS")
	}
	if started(t, marker) {
		t.Error("the refused worker started a server")
	}
}
