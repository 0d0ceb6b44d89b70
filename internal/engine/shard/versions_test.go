package shard_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// served is what runPipes returned.
type served struct {
	res shard.ShardResult
	err error
}

// TestSlowClientVersionKeepsWorker checks that a worker whose client's
// program takes minutes to say its version (a Node CLI on a loaded
// machine) is not lost: it sends heartbeats while it asks, then its hello
// with the version of the program the setting's options name, and the
// image digest its runner gave it. The version ask blocks until the test
// releases it; time is synctest's.
func TestSlowClientVersionKeepsWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		asked := make(chan json.RawMessage, 1)
		f := &fakeClient{}
		def := f.definition(false)
		def.Version = func(ctx context.Context, options json.RawMessage) (string, error) {
			asked <- options
			select {
			case <-release:
				return "7.7.7", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		b := oneSetting([]string{"answer"}, 1, 0)
		b.Settings[0].Options = json.RawMessage(`{"command":"/opt/fake/bin/fake"}`)
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		w := &shard.Worker{
			Clients: client.NewRegistry(def), Results: store.OpenDir(t.TempDir(), nil), Logger: logger,
			MSTVersion: "test", WorkDir: t.TempDir(), ImageDigest: "mst-worker:test@sha256:0123abcd",
		}
		coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil), Events: &trialEvents{}, Logger: logger}
		done := make(chan served, 1)
		go func() {
			res, err := runPipes(t.Context(), w, b, coord, nil)
			done <- served{res, err}
		}()
		if got := <-asked; string(got) != `{"command":"/opt/fake/bin/fake"}` {
			t.Errorf("Version was asked with options %s, want the setting's", got)
		}
		time.Sleep(5 * time.Minute) // synctest's clock: five times the silence
		synctest.Wait()
		select {
		case s := <-done:
			t.Fatalf("Serve returned %v while the worker was still asking its client's version, want it waiting", s.err)
		default:
		}
		close(release)
		s := <-done
		if s.err != nil {
			t.Fatalf("runPipes(a slow version) = %v, want no error", s.err)
		}
		h := s.res.Hello
		if h == nil || h.ClientVersions["fake"] != "7.7.7" || h.ImageDigest != "mst-worker:test@sha256:0123abcd" {
			t.Errorf("hello = %+v, want fake at 7.7.7 and the image digest", h)
		}
		if s.res.Done == nil || s.res.Done.Counts.Answered != 1 {
			t.Errorf("done = %+v, want the one trial answered", s.res.Done)
		}
	})
}

// TestHelloClientVersions checks the versions a hello carries: each
// setting's program is asked with the setting's options; a client whose
// variants run one version is recorded under its name, one whose variants
// run different versions under CLIENT@VARIANT; a client built into MST
// (no Version) gets MST's version; a version that cannot be found is left
// out. The transcripts of a built-in client that says no version of its
// own record MST's.
func TestHelloClientVersions(t *testing.T) {
	t.Parallel()
	versionOf := map[string]string{`{"command":"old"}`: "1.0.0", `{"command":"new"}`: "2.0.0", `{"command":"same"}`: "3.0.0"}
	cli := func(name string) *client.Definition {
		d := (&fakeClient{}).definition(true)
		d.Name = name
		d.Version = func(_ context.Context, options json.RawMessage) (string, error) {
			return versionOf[string(options)], nil
		}
		return d
	}
	builtin := (&fakeClient{}).definition(true)
	builtin.Name = "builtin"
	b := &shard.Bundle{Run: transcript.Run{ID: "r"}, Cases: []dataset.Case{{ID: "answer-a", Input: "answer"}}}
	b.Settings = []shard.Setting{
		{Variant: "old", Client: "split", Model: "m", Options: json.RawMessage(`{"command":"old"}`)},
		{Variant: "new", Client: "split", Model: "m", Options: json.RawMessage(`{"command":"new"}`)},
		{Variant: "a", Client: "one", Model: "m", Options: json.RawMessage(`{"command":"same"}`)},
		{Variant: "b", Client: "one", Model: "m", Options: json.RawMessage(`{"command":"same"}`)},
		{Variant: "c", Client: "lost", Model: "m", Options: json.RawMessage(`{"command":"missing"}`)},
		{Variant: "v", Client: "builtin", Model: "m"},
	}
	b.Add(shard.Planned{Key: transcript.Key{Case: "answer-a", Variant: "v", Trial: 1}, Setting: 5})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	results := store.OpenDir(t.TempDir(), nil)
	w := &shard.Worker{Clients: client.NewRegistry(cli("split"), cli("one"), cli("lost"), builtin), Results: results, Logger: logger, MSTVersion: "0.9.0-test", WorkDir: t.TempDir()}
	coord := &shard.Coordinator{MSTVersion: "0.9.0-test", Limits: shard.NewLimiter(nil, nil), Events: &trialEvents{}, Logger: logger}
	res, err := runPipes(t.Context(), w, b, coord, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"split@old": "1.0.0", "split@new": "2.0.0", "one": "3.0.0", "builtin": "0.9.0-test"}
	if diff := cmp.Diff(want, res.Hello.ClientVersions); diff != "" {
		t.Errorf("hello.clientVersions (-want +got):\n%s", diff)
	}
	tr, err := results.ReadTranscript(t.Context(), transcript.Key{Case: "answer-a", Variant: "v", Trial: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Client.Version != "0.9.0-test" {
		t.Errorf("a built-in client's transcript records version %q, want MST's, 0.9.0-test", tr.Client.Version)
	}
}
