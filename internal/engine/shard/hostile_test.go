package shard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// hostileCaseIDs are case ids a shared dataset may hold: each is a
// planned trial of the shard, so the coordinator takes its reports, and
// none may make it write outside the run's folder.
func hostileCaseIDs() []string {
	return []string{
		"plain",
		"..",
		".",
		"../../outside/evil",
		"/tmp/evil",
		`..\..\outside\evil`,
		"a/../../b",
		"nul\x00byte",
		"line\nbreak\r\x1b[31m",
		"\u202eright-to-left",
		strings.Repeat("長", 300),
		strings.Repeat("x", 1000),
		"%2e%2e%2f",
	}
}

// hostilePaths are transcript paths a lying worker may send. None leaves
// the worker's results, so the coordinator must never ask the runner for
// one of them.
func hostilePaths(outside string) []string {
	return []string{
		"..",
		"../x.json",
		"../../outside/x.json",
		"transcripts/../../x.json",
		filepath.Join(outside, "x.json"),
		"/etc/passwd",
		"./transcripts/x.json",
		"transcripts//x.json",
		"transcripts/x.json/",
		"nul\x00byte.json",
		strings.Repeat("../", 2000) + "x.json",
		"C:/x.json",
		"transcripts/C:/x.json/..",
		`transcripts\..\..\x.json`,
		`transcripts/..\..\x.json`,
		"transcripts/\u00fc.json",
		"transcripts/tab\there.json",
		"transcripts/" + strings.Repeat("y", 300) + ".json",
		"transcripts/x.json\x00",
		"x.json",
		"transcripts/x.txt",
	}
}

// storeEvents stores every reported trial in a run folder, as the run's
// collector does: the fetched bytes decode to a transcript of the
// reported key, which the store writes by its key.
type storeEvents struct {
	t   *testing.T
	run store.Run

	mu       sync.Mutex
	reported []transcript.Key
}

func (e *storeEvents) Trial(_ int, m *protocol.Trial, data []byte) {
	e.mu.Lock()
	e.reported = append(e.reported, m.Key)
	e.mu.Unlock()
	tr, err := transcript.Decode(data)
	if err != nil || tr.Key != m.Key {
		return // the collector refuses these; nothing is stored
	}
	if _, err := e.run.WriteTranscript(context.Background(), tr); err != nil {
		e.t.Logf("storing %s: %v", m.Key, err)
	}
}

// TestHostileWorker plays a worker that lies in every way the protocol
// lets it: paths that leave its results, keys of other shards, unknown
// variants, trial numbers out of range, trials never granted or reported
// twice, and case ids (planned ones) that look like paths. Whatever it
// sends, the coordinator never fetches a path outside the worker's
// results, reports only planned, granted trials once each, and nothing is
// written outside the run's folder.
func TestHostileWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		runDir := filepath.Join(root, "run")
		workerDir := filepath.Join(root, "worker")
		outside := filepath.Join(root, "outside")
		for _, d := range []string{runDir, workerDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		paths := hostilePaths(outside)
		ids := hostileCaseIDs()

		// The shard's planned trials: each hostile case id, one trial per
		// hostile path and one more reported with a good path.
		b := &shard.Bundle{Shard: 0}
		for _, id := range ids {
			for n := 1; n <= len(paths)+1; n++ {
				b.Add(shard.Planned{Key: transcript.Key{Case: id, Variant: "v", Trial: n}})
			}
		}
		// The worker's results hold a transcript for every key it will
		// report with a good path, named by a counter.
		files := map[transcript.Key]string{}
		writeResult := func(k transcript.Key) string {
			name := fmt.Sprintf("transcripts/t%d.json", len(files))
			tr := transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Run: "r", Key: k, Outcome: transcript.Outcome{Status: transcript.Answered}}
			data, err := json.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(workerDir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			files[k] = name
			return name
		}

		var fetchMu sync.Mutex
		var fetched []string
		fetch := func(ctx context.Context, path string) ([]byte, error) {
			fetchMu.Lock()
			fetched = append(fetched, path)
			fetchMu.Unlock()
			return os.ReadFile(filepath.Join(workerDir, filepath.FromSlash(path)))
		}
		ev := &storeEvents{t: t, run: store.OpenDir(runDir, nil)}
		c := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: discardLogger(), Bundles: []*shard.Bundle{b}}
		w := startServe(t, t.Context(), c, 0, fetch)
		w.sendMsg(helloFrom("test", 0))

		var id int64
		// run acquires k, waits for the answer, and reports the trial
		// with path under acquire (id when acquire is -1).
		run := func(k transcript.Key, path string, acquire int64) {
			id++
			w.sendMsg(&protocol.Acquire{ID: id, Key: k})
			synctest.Wait()
			if acquire == -1 {
				acquire = id
			}
			w.sendMsg(&protocol.Trial{Acquire: acquire, Key: k, Status: transcript.Answered, Path: path})
			synctest.Wait()
		}
		var want []transcript.Key
		for _, cid := range ids {
			for n, p := range paths {
				run(transcript.Key{Case: cid, Variant: "v", Trial: n + 1}, p, -1)
			}
			k := transcript.Key{Case: cid, Variant: "v", Trial: len(paths) + 1}
			name := writeResult(k)
			run(k, name, -1)
			want = append(want, k)
			// The same trial again, under a new acquire and under the
			// refused one.
			run(k, name, -1)
			w.sendMsg(&protocol.Trial{Acquire: id, Key: k, Status: transcript.Answered, Path: name})
			synctest.Wait()
		}
		// Keys that are no trial of this shard, each with a real file.
		for _, k := range []transcript.Key{
			{Case: "another-shards-case", Variant: "v", Trial: 1},
			{Case: "plain", Variant: "unknown-variant", Trial: 1},
			{Case: "plain", Variant: "v", Trial: 0},
			{Case: "plain", Variant: "v", Trial: -1},
			{Case: "plain", Variant: "v", Trial: len(paths) + 2},
			{Case: "../../outside/evil", Variant: "../../outside", Trial: 1},
		} {
			name := writeResult(k)
			run(k, name, -1)
			// And reported without an acquire, or under a granted one.
			w.sendMsg(&protocol.Trial{Key: k, Status: transcript.Answered, Path: name})
			w.sendMsg(&protocol.Trial{Acquire: 1, Key: k, Status: transcript.Answered, Path: name})
			synctest.Wait()
		}
		w.sendMsg(&protocol.Done{CleanupOK: true})
		if _, err := w.wait(); err != nil {
			t.Fatalf("Serve(a lying worker) = %v, want no error: its lies are refused one by one", err)
		}

		for _, p := range fetched {
			if !fs.ValidPath(p) {
				t.Errorf("Serve fetched %q, a path outside the worker's results", p)
			}
		}
		var wantFetched []string
		for _, k := range want {
			wantFetched = append(wantFetched, files[k])
		}
		if !slices.Equal(fetched, wantFetched) {
			t.Errorf("Serve fetched %q, want only the good paths of planned trials, once each: %q", fetched, wantFetched)
		}
		if !slices.Equal(ev.reported, want) {
			t.Errorf("Serve reported %d trials %q, want the %d planned ones reported with a good path, once each: %q", len(ev.reported), ev.reported, len(want), want)
		}
		// Nothing outside the run folder and the worker's results.
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			if rel != "." && top != "run" && top != "worker" {
				t.Errorf("%s was written, outside the run's folder", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The keys of the stored transcripts, as their contents say (the
		// store's file names are its own business).
		var got []transcript.Key
		err = ev.run.Transcripts(context.Background(), func(tr *transcript.Transcript) error {
			got = append(got, tr.Key)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, compareKeys)
		slices.SortFunc(want, compareKeys)
		if !slices.Equal(got, want) {
			t.Errorf("the run folder holds transcripts of %q, want %q", got, want)
		}
	})
}

func compareKeys(a, b transcript.Key) int {
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}
