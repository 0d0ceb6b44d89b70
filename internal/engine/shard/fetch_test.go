package shard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// machineFetch reads files from dir, the worker machine's results folder,
// the way a machine runner copies them back. It fails the first failures
// calls, and counts every call.
type machineFetch struct {
	dir      string
	failures int

	mu    sync.Mutex
	calls []string
}

func (m *machineFetch) fetch(ctx context.Context, path string) ([]byte, error) {
	m.mu.Lock()
	m.calls = append(m.calls, path)
	n := len(m.calls)
	m.mu.Unlock()
	if n <= m.failures {
		return nil, fmt.Errorf("copying %s back: the machine did not answer", path)
	}
	return os.ReadFile(filepath.Join(m.dir, filepath.FromSlash(path)))
}

// TestServeFetchesTranscripts runs a shard whose worker writes into a
// folder of its own, as on another machine, with a fetch that copies each
// transcript back. Serve tries a failing copy once more; Events get the
// bytes the worker wrote, and a trial whose copy fails twice is not
// reported: it stays missing.
func TestServeFetchesTranscripts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		failures int
		calls    int
		reported bool
	}{
		{"copy works", 0, 1, true},
		{"copy works the second time", 1, 2, true},
		{"copy fails twice", 2, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			machine := t.TempDir()
			f := &fakeClient{}
			ev := &trialEvents{}
			fetch := &machineFetch{dir: machine, failures: tt.failures}
			b := oneSetting([]string{"answer"}, 1, 0)
			res, err := runPipes(t.Context(), fakeWorker(t, f, false, store.OpenDir(machine, nil)), b, fakeCoordinator(ev), fetch.fetch)
			if err != nil {
				t.Fatalf("runPipes(fetch failing %d times) = %v, want no error: a failed copy costs one trial, not the shard", tt.failures, err)
			}
			if res.Done == nil || res.Done.Counts.Answered != 1 {
				t.Errorf("runPipes(fetch failing %d times) done = %+v, want the worker's one answered trial", tt.failures, res.Done)
			}
			if len(fetch.calls) != tt.calls {
				t.Errorf("runPipes(fetch failing %d times) fetched %d times (%q), want %d", tt.failures, len(fetch.calls), fetch.calls, tt.calls)
			}
			trials, data := ev.got(), ev.fetched()
			if !tt.reported {
				if len(trials) != 0 {
					t.Errorf("runPipes(fetch failing twice) reported %+v, want nothing: the trial stays missing", trials)
				}
				return
			}
			if len(trials) != 1 {
				t.Fatalf("runPipes(fetch failing %d times) reported %d trials, want 1", tt.failures, len(trials))
			}
			want, err := os.ReadFile(filepath.Join(machine, filepath.FromSlash(trials[0].Path)))
			if err != nil {
				t.Fatalf("the reported path %q is not the worker's file: %v", trials[0].Path, err)
			}
			if string(data[0]) != string(want) {
				t.Errorf("Events.Trial got bytes %q, want the worker's file %q", data[0], want)
			}
			tr, err := transcript.Decode(data[0])
			if err != nil || tr.Key != b.Trial(0).Key || tr.Outcome.Status != transcript.Answered {
				t.Errorf("the fetched bytes decode to %+v, %v; want the answered transcript of %s", tr, err, b.Trial(0).Key)
			}
		})
	}
}

// TestServeFetchBounded checks that Serve bounds the copy of a transcript
// by CopyBackTimeout, and that it goes on reading the worker meanwhile: a
// worker that sends its heartbeats through a copy longer than the silence
// period is not lost.
func TestServeFetchBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &trialEvents{}
		c := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: discardLogger()}
		var mu sync.Mutex
		// bounds are how long each try had left when it started.
		var bounds []time.Duration
		fetch := func(ctx context.Context, path string) ([]byte, error) {
			d, ok := ctx.Deadline()
			mu.Lock()
			if !ok {
				d = time.Now().Add(100 * time.Hour)
			}
			bounds = append(bounds, time.Until(d))
			mu.Unlock()
			<-ctx.Done()
			return nil, fmt.Errorf("copying %s back: %w", path, ctx.Err())
		}
		w := startServe(t, t.Context(), c, 0, fetch)
		key := transcript.Key{Case: "c", Variant: "v", Trial: 1}
		w.sendMsg(helloFrom("test", 0))
		w.sendMsg(&protocol.Acquire{ID: 1, Key: key})
		// A worker reports a trial only once it was granted (the grant
		// may come from another goroutine of Serve).
		synctest.Wait()
		if g := w.granted(); len(g) != 1 {
			t.Fatalf("granted %v, want the one acquire", g)
		}
		w.sendMsg(&protocol.Trial{Acquire: 1, Key: key, Status: transcript.Answered, Path: "transcripts/v/c.t1.json"})
		// Both tries end at CopyBackTimeout; the worker's heartbeats (every
		// 10s, as a worker sends them) reach Serve all the while.
		for elapsed := time.Duration(0); elapsed < 2*shard.CopyBackTimeout; elapsed += 10 * time.Second {
			time.Sleep(10 * time.Second) // synctest's fake clock
			w.sendMsg(&protocol.Heartbeat{})
		}
		synctest.Wait()
		if w.returned() {
			_, err := w.wait()
			t.Fatalf("Serve(a copy that hangs) = %v when the copy ended, want it still serving: the worker sent its heartbeats", err)
		}
		w.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: 1, Answered: 1}, CleanupOK: true})
		_, err := w.wait()
		if err != nil {
			t.Errorf("Serve(a copy that hangs, then done) = %v, want no error", err)
		}
		if len(bounds) != 2 || bounds[0] != shard.CopyBackTimeout || bounds[1] < 0 || bounds[1] > shard.CopyBackTimeout {
			t.Errorf("the tries had %v left when they started, want two, the first with CopyBackTimeout (%s) and none with more", bounds, shard.CopyBackTimeout)
		}
		if got := ev.got(); len(got) != 0 {
			t.Errorf("Serve(a copy that hangs) reported %+v, want nothing", got)
		}
	})
}
