package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// fakeWorker is a worker for the fake client f, writing into results.
func fakeWorker(t *testing.T, f *fakeClient, concurrent bool, results store.Run) *shard.Worker {
	return &shard.Worker{Clients: client.NewRegistry(f.definition(concurrent)), Results: results, Logger: discardLogger(), MSTVersion: "test", WorkDir: t.TempDir()}
}

// fakeCoordinator is a coordinator without limits reporting to ev.
func fakeCoordinator(ev shard.Events) *shard.Coordinator {
	return &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil), Events: ev, Logger: discardLogger()}
}

// TestWorkerTrialTimeout checks that a trial runs under its setting's
// Timeout: a trial that blocks past it ends timed-out after exactly the
// timeout, its session sees the deadline (not a cancel), and the run goes
// on with the next trial.
func TestWorkerTrialTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const timeout = 5 * time.Second
		f := &fakeClient{}
		results := store.OpenDir(t.TempDir(), nil)
		ev := &trialEvents{}
		b := oneSetting([]string{"hang", "answer"}, 1, timeout)
		start := time.Now()
		got := runPipesWithin(t, time.Hour, fakeWorker(t, f, false, results), b, fakeCoordinator(ev), nil)
		res, err := got.res, got.err
		if err != nil {
			t.Fatalf("runPipes(a trial that hangs, Timeout %s) = %v", timeout, err)
		}
		if got := time.Since(start); got != timeout {
			t.Errorf("runPipes(a trial that hangs, Timeout %s) took %s, want %s", timeout, got, timeout)
		}
		if c := res.Done.Counts; c.TimedOut != 1 || c.Answered != 1 || c.Cancelled != 0 || c.Missing != 0 {
			t.Errorf("runPipes(hang, answer; Timeout %s) counts = %+v, want 1 timed out, 1 answered", timeout, c)
		}
		if !slices.Equal(f.hangEnds, []error{context.DeadlineExceeded}) {
			t.Errorf("the hanging trial's context ended with %v, want [%v]: the timeout, not the run, ends it", f.hangEnds, context.DeadlineExceeded)
		}
		tr, err := results.ReadTranscript(t.Context(), b.Trial(0).Key)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Outcome.Status != transcript.TimedOut || tr.Timing.DurationMs != float64(timeout.Milliseconds()) {
			t.Errorf("hang: outcome %+v after %vms, want timed-out after %dms", tr.Outcome, tr.Timing.DurationMs, timeout.Milliseconds())
		}
	})
}

// TestWorkerTrialCancelled checks that a cancel of the run ends a trial in
// flight as cancelled, however long its timeout, and that no trial starts
// after it: the trials not started stay missing.
func TestWorkerTrialCancelled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &fakeClient{}
		results := store.OpenDir(t.TempDir(), nil)
		ev := &trialEvents{}
		b := oneSetting([]string{"hang", "answer"}, 1, time.Hour)
		ctx, interrupt := context.WithCancel(t.Context())
		defer interrupt()
		end := make(chan ended, 1)
		go func() {
			res, err := runPipes(ctx, fakeWorker(t, f, false, results), b, fakeCoordinator(ev), nil)
			end <- ended{res, err}
		}()
		synctest.Wait()
		if f.runs != 1 {
			t.Fatalf("before the cancel, %d trials ran, want the hanging one", f.runs)
		}
		interrupt()
		got := <-end
		if got.err != nil {
			t.Fatalf("runPipes(interrupted) = %v, want no error: the worker ends and says done", got.err)
		}
		if c := got.res.Done.Counts; c.Cancelled != 1 || c.Missing != 1 || c.Answered != 0 || c.TimedOut != 0 {
			t.Errorf("runPipes(interrupted during the first of 2 trials) counts = %+v, want 1 cancelled, 1 missing", c)
		}
		if !slices.Equal(f.hangEnds, []error{context.Canceled}) {
			t.Errorf("the hanging trial's context ended with %v, want [%v]", f.hangEnds, context.Canceled)
		}
		trials := ev.got()
		if len(trials) != 1 || trials[0].Status != transcript.Cancelled || trials[0].Key != b.Trial(0).Key {
			t.Errorf("runPipes(interrupted) reported %+v, want the first trial, cancelled", trials)
		}
		if _, err := results.ReadTranscript(t.Context(), b.Trial(1).Key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the trial after the cancel: ReadTranscript = %v, want ErrNotFound (missing)", err)
		}
	})
}

// TestWorkerSettingSessions checks that each setting opens its own session
// with its own parameters, and trials of one setting share one: a case
// that overrides the model gets a session of its own, never the variant's.
func TestWorkerSettingSessions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		concurrent  bool
		concurrency int
	}{
		{"one at a time", false, 1},
		{"concurrent client", true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			settings := []shard.Setting{
				{Variant: "v", Client: "fake", Model: "m", Options: json.RawMessage(`{"effort":1}`), Timeout: 30 * time.Second, KeyEnv: "OTHER_KEY"},
				{Variant: "v", Client: "fake", Model: "m2", Options: json.RawMessage(`{"effort":2}`), Timeout: 30 * time.Second, KeyEnv: "OTHER_KEY"},
			}
			b := &shard.Bundle{Run: transcript.Run{ID: "r"}, Settings: settings, Concurrency: tt.concurrency}
			// Cases b and d override the model: setting 1.
			for i, id := range []string{"a", "b", "c", "d"} {
				b.Cases = append(b.Cases, dataset.Case{ID: id, Input: "answer"})
				b.Add(shard.Planned{Key: transcript.Key{Case: id, Variant: "v", Trial: 1}, Setting: i % 2})
			}
			f := &fakeClient{}
			results := store.OpenDir(t.TempDir(), nil)
			res, err := runPipes(t.Context(), fakeWorker(t, f, tt.concurrent, results), b, fakeCoordinator(nil), nil)
			if err != nil || res.Done.Counts.Answered != 4 {
				t.Fatalf("runPipes(4 trials, 2 settings) = %+v, %v; want 4 answered", res.Done, err)
			}
			if f.opens != 2 || f.closes != 2 {
				t.Errorf("runPipes(2 settings, 2 trials each) opened %d sessions and closed %d, want 2 and 2: one per setting", f.opens, f.closes)
			}
			var got []client.OpenParams
			for _, p := range f.params {
				got = append(got, client.OpenParams{Variant: p.Variant, Model: p.Model, Options: p.Options, Timeout: p.Timeout, KeyEnv: p.KeyEnv})
			}
			slices.SortFunc(got, func(a, b client.OpenParams) int { return strings.Compare(a.Model, b.Model) })
			var want []client.OpenParams
			for _, s := range settings {
				want = append(want, client.OpenParams{Variant: s.Variant, Model: s.Model, Options: s.Options, Timeout: s.Timeout, KeyEnv: s.KeyEnv})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Open was given (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"a": "m", "b": "m2", "c": "m", "d": "m2"}, f.ranOn); diff != "" {
				t.Errorf("the model of the session each case ran on (-want +got):\n%s", diff)
			}
			for pt := range b.Trials() {
				tr, err := results.ReadTranscript(t.Context(), pt.Key)
				if err != nil {
					t.Fatal(err)
				}
				if want := settings[pt.Setting].Model; tr.Model != want {
					t.Errorf("transcript of %s has model %q, want its setting's %q", pt.Key, tr.Model, want)
				}
			}
		})
	}
}

// recordingRun is a store.Run that records the errors of transcript
// writes.
type recordingRun struct {
	store.Run
	mu   sync.Mutex
	errs []error
}

func (r *recordingRun) WriteTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	path, err := r.Run.WriteTranscript(ctx, t)
	r.record(err)
	return path, err
}

func (r *recordingRun) ReplaceTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	path, err := r.Run.ReplaceTranscript(ctx, t)
	r.record(err)
	return path, err
}

func (r *recordingRun) record(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// TestWorkerReplace runs two trials whose transcripts the store already
// holds, under a limit of one trial at a time. Without Replace, each write
// fails with ErrExists, the old transcript stays, the trial stays missing
// and its room goes back, so the second trial runs too. With Replace, the
// new transcripts replace the old.
func TestWorkerReplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		replace bool
		// answer is the stored answer after the run.
		answer string
		counts transcript.Counts
		// exists is whether each write fails with ErrExists.
		exists   bool
		reported int
	}{
		{false, "old", transcript.Counts{Planned: 2, Missing: 2}, true, 0},
		{true, "ok", transcript.Counts{Planned: 2, Answered: 2}, false, 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("replace=%t", tt.replace), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				results := &recordingRun{Run: store.OpenDir(dir, nil)}
				b := oneSetting([]string{"answer", "answer"}, 2, 0)
				b.Settings[0].Provider = "anthropic"
				for i := range b.Series {
					b.Series[i].Replace = tt.replace
				}
				for pt := range b.Trials() {
					old := &transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Run: "r", Key: pt.Key,
						Answer: "old", Outcome: transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient}}
					if _, err := results.Run.WriteTranscript(t.Context(), old); err != nil {
						t.Fatal(err)
					}
				}
				f := &fakeClient{}
				ev := &trialEvents{}
				coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(map[string]int{"anthropic": 1}, nil), Events: ev, Logger: discardLogger()}
				got := runPipesWithin(t, 10*time.Minute, fakeWorker(t, f, false, results), b, coord, nil)
				if got.err != nil {
					t.Fatalf("runPipes(Replace %t) = %v", tt.replace, got.err)
				}
				if diff := cmp.Diff(tt.counts, got.res.Done.Counts); diff != "" {
					t.Errorf("runPipes(Replace %t, transcripts stored) counts (-want +got):\n%s", tt.replace, diff)
				}
				if n := len(ev.got()); n != tt.reported {
					t.Errorf("runPipes(Replace %t) reported %d trials, want %d", tt.replace, n, tt.reported)
				}
				if len(results.errs) != b.Size() {
					t.Fatalf("the worker wrote %d transcripts, want %d", len(results.errs), b.Size())
				}
				for _, err := range results.errs {
					if errors.Is(err, store.ErrExists) != tt.exists || (!tt.exists && err != nil) {
						t.Errorf("runPipes(Replace %t): a write returned %v; want ErrExists: %t", tt.replace, err, tt.exists)
					}
				}
				for pt := range b.Trials() {
					tr, err := results.ReadTranscript(t.Context(), pt.Key)
					if err != nil {
						t.Fatal(err)
					}
					if tr.Answer != tt.answer {
						t.Errorf("runPipes(Replace %t): stored answer of %s = %q, want %q", tt.replace, pt.Key, tr.Answer, tt.answer)
					}
				}
			})
		})
	}
}

// TestWorkerHeartbeat checks that a worker sends a heartbeat every
// Worker.Heartbeat (HeartbeatEvery when zero) from hello to done, while it
// waits for room and while a trial runs, with what is in flight and done.
func TestWorkerHeartbeat(t *testing.T) {
	t.Parallel()
	for _, every := range []time.Duration{0, 3 * time.Second} {
		t.Run(fmt.Sprint("every=", every), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				interval := every
				if interval == 0 {
					interval = shard.HeartbeatEvery
				}
				// The trial takes two intervals.
				def := &client.Definition{Name: "fake", Options: json.RawMessage(`{}`),
					Run: func(ctx context.Context, p client.OpenParams, tr client.Trial) (client.Result, error) {
						select {
						case <-time.After(2 * interval):
						case <-ctx.Done():
							return client.Result{}, ctx.Err()
						}
						return client.Result{Answer: "ok", Outcome: transcript.Outcome{Status: transcript.Answered}}, nil
					}}
				w := &shard.Worker{Clients: client.NewRegistry(def), Results: store.OpenDir(t.TempDir(), nil), Heartbeat: every,
					Logger: discardLogger(), MSTVersion: "test", WorkDir: t.TempDir()}
				toWorker, fromTest := io.Pipe()
				fromWorker, toTest := io.Pipe()
				start := time.Now()
				var mu sync.Mutex
				var seen []string
				read := make(chan struct{})
				go func() {
					defer close(read)
					dec := protocol.NewDecoder(fromWorker)
					for {
						m, err := dec.Read()
						if err != nil {
							return
						}
						line := fmt.Sprintf("%s %T", time.Since(start), m)
						if hb, ok := m.(*protocol.Heartbeat); ok {
							line += fmt.Sprintf(" inFlight=%d done=%d", hb.InFlight, hb.Done)
						}
						mu.Lock()
						seen = append(seen, line)
						mu.Unlock()
					}
				}()
				ran := make(chan error, 1)
				go func() {
					err := w.Run(t.Context(), oneSetting([]string{"slow"}, 1, 0), toWorker, toTest)
					toTest.Close()
					ran <- err
				}()
				// The coordinator accepts the hello at once; room comes
				// after three and a half intervals.
				enc := protocol.NewEncoder(fromTest)
				if err := enc.Write(&protocol.Tokens{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(interval * 7 / 2)
				synctest.Wait()
				if err := enc.Write(&protocol.Granted{ID: 1}); err != nil {
					t.Fatal(err)
				}
				if err := <-ran; err != nil {
					t.Fatalf("Run = %v", err)
				}
				fromTest.Close()
				<-read
				at := func(n float64) time.Duration { return time.Duration(n * float64(interval)) }
				want := []string{
					"0s *protocol.Hello",
					"0s *protocol.Acquire",
					fmt.Sprintf("%s *protocol.Heartbeat inFlight=0 done=0", at(1)),
					fmt.Sprintf("%s *protocol.Heartbeat inFlight=0 done=0", at(2)),
					fmt.Sprintf("%s *protocol.Heartbeat inFlight=0 done=0", at(3)),
					fmt.Sprintf("%s *protocol.Heartbeat inFlight=1 done=0", at(4)),
					fmt.Sprintf("%s *protocol.Heartbeat inFlight=1 done=0", at(5)),
					fmt.Sprintf("%s *protocol.Trial", at(5.5)),
					fmt.Sprintf("%s *protocol.Done", at(5.5)),
				}
				if diff := cmp.Diff(want, seen); diff != "" {
					t.Errorf("Worker{Heartbeat: %s} sent (-want +got):\n%s", every, diff)
				}
			})
		})
	}
}
