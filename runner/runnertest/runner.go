package runnertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/client/api"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Harness says how the suite makes and drives the runner under test.
type Harness struct {
	// New makes the runner for one check. The suite fills p's Shards,
	// Keep (never), Logger, Worker (for runners that run workers in this
	// process) and Secrets; New adds what the runner itself needs (MST,
	// Options) and may change the rest. The suite closes the runner.
	New func(t *testing.T, p runner.Params) (runner.Runner, error)
	// MSTVersion is the MST version the runner's workers run. The suite's
	// coordinator runs with it and checks that every hello reports it.
	MSTVersion string
	// Shards is how many shards the suite runs at once through one runner:
	// at least 1, at most the runner's MaxShards.
	Shards int
	// Server is the command that runs internal/testserver on the runner's
	// machines. Empty means this test binary, whose TestMain calls Serve.
	Server []string
}

// Run checks the runner h makes against the runner contract. It runs its
// checks as parallel subtests of t.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.MSTVersion == "" {
		t.Fatal("runnertest.Harness needs New and MSTVersion")
	}
	h.Shards = max(h.Shards, 1)
	t.Run("Transcripts", func(t *testing.T) { t.Parallel(); testTranscripts(t, &h) })
	t.Run("Cancel", func(t *testing.T) { t.Parallel(); testCancel(t, &h) })
	t.Run("ReadinessFailure", func(t *testing.T) { t.Parallel(); testReadinessFailure(t, &h) })
	t.Run("CloseUnused", func(t *testing.T) {
		t.Parallel()
		r, err := h.New(t, h.params(t))
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close of a runner that ran nothing = %v, want nil", err)
		}
	})
}

// testTranscripts runs h.Shards shards at once, two variants × three cases
// × two trials each, and checks that every trial comes back once.
func testTranscripts(t *testing.T, h *Harness) {
	srv := h.server(t)
	var bundles []*shard.Bundle
	for i := range h.Shards {
		var cases []dataset.Case
		for j := 1; j <= 3; j++ {
			cases = append(cases, dataset.Case{ID: fmt.Sprintf("s%d-c%d", i, j), Input: fmt.Sprintf("Please echo 'shard %d case %d'", i, j)})
		}
		bundles = append(bundles, newBundle("transcripts", i, h.Shards, srv, cases, []string{"a", "b"}, 2, 4))
	}
	results := t.TempDir()
	r := h.newRunner(t)
	rec := &events{}
	coord := h.coordinator(t, rec)
	reports := make([]runner.ShardReport, len(bundles))
	errs := make([]error, len(bundles))
	var wg sync.WaitGroup
	for i, b := range bundles {
		wg.Go(func() {
			reports[i], errs[i] = r.RunShard(t.Context(), runner.Shard{Bundle: b, Results: results, Serve: coord.Serve})
		})
	}
	wg.Wait()

	want := map[string]transcript.Key{}
	for i, b := range bundles {
		if errs[i] != nil {
			t.Errorf("RunShard(shard %d) = %v, want nil", i, errs[i])
			continue
		}
		checkHello(t, h, i, reports[i].Result.Hello)
		if d := reports[i].Result.Done; d == nil {
			t.Errorf("shard %d: no done message came back", i)
		} else if got, wantCounts := d.Counts, (transcript.Counts{Planned: len(b.Trials), Answered: len(b.Trials)}); got != wantCounts {
			t.Errorf("shard %d: done counts = %+v, want %+v", i, got, wantCounts)
		}
		for _, k := range b.Trials {
			want[store.TranscriptPath(k)] = k
		}
	}
	if diff := cmp.Diff(sortedKeys(want), transcriptFiles(t, results)); diff != "" {
		t.Errorf("transcripts in the run folder (-want +got):\n%s", diff)
	}
	for p, k := range want {
		tr, err := store.ReadTranscript(filepath.Join(results, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // reported above
		}
		if err != nil {
			t.Errorf("reading %s: %v", p, err)
			continue
		}
		var shardIndex, caseNo int
		fmt.Sscanf(k.Case, "s%d-c%d", &shardIndex, &caseNo)
		if tr.Key != k || tr.Shard != shardIndex || tr.Run != bundles[0].Run.ID {
			t.Errorf("%s: key %v, shard %d, run %q; want %v, %d, %q", p, tr.Key, tr.Shard, tr.Run, k, shardIndex, bundles[0].Run.ID)
		}
		if tr.Outcome.Status != transcript.Answered {
			t.Errorf("%s: status %s (%s), want answered", p, tr.Outcome.Status, tr.Outcome.Detail)
		}
		// The answer quotes the test server's echo, so the MCP server on
		// the machine really ran.
		if text := fmt.Sprintf("shard %d case %d", shardIndex, caseNo); !strings.Contains(tr.Answer, text) {
			t.Errorf("%s: answer %q does not quote the echoed %q", p, tr.Answer, text)
		}
	}
	if diff := cmp.Diff(countKeys(want), rec.counts()); diff != "" {
		t.Errorf("trials the coordinator was told of, by key (-want +got):\n%s", diff)
	}
}

// testCancel cancels a shard while two trials sleep: they end cancelled,
// the trial that finished before stays answered, and the worker says done.
func testCancel(t *testing.T, h *Harness) {
	cases := []dataset.Case{
		{ID: "first", Input: "Please echo 'before the cancel'"},
		{ID: "nap-1", Input: "sleep for 300 seconds please"},
		{ID: "nap-2", Input: "sleep for 300 seconds please"},
	}
	b := newBundle("cancel", 0, 1, h.server(t), cases, []string{"v"}, 1, 3)
	results := t.TempDir()
	r := h.newRunner(t)
	coord := h.coordinator(t, &events{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The cancel goes out once the first trial is reported and a heartbeat
	// shows both naps past their acquire: from then on a nap can only end
	// cancelled, whatever the timing.
	var firstDone bool
	watch := func(m message) {
		switch {
		case m.Type == shard.TypeTrial && m.Key.Case == "first":
			firstDone = true
		case m.Type == shard.TypeHeartbeat && firstDone && m.InFlight >= 2:
			cancel()
		}
	}
	serve := func(ctx context.Context, i int, in io.Reader, out io.Writer, fetch shard.Fetch) (shard.ShardResult, error) {
		return coord.Serve(ctx, i, &tap{r: in, fn: watch}, out, fetch)
	}
	rep, err := r.RunShard(ctx, runner.Shard{Bundle: b, Results: results, Serve: serve})
	if err != nil {
		t.Fatalf("RunShard of a cancelled shard = %v, want nil (the worker still says done)", err)
	}
	if ctx.Err() == nil {
		t.Fatal("RunShard returned before the cancel")
	}
	if rep.Result.Done == nil {
		t.Fatal("a cancelled shard sent no done message")
	}
	if got, want := rep.Result.Done.Counts, (transcript.Counts{Planned: 3, Answered: 1, Cancelled: 2}); got != want {
		t.Errorf("done counts = %+v, want %+v", got, want)
	}
	wantStatus := map[string]string{"first": transcript.Answered, "nap-1": transcript.Cancelled, "nap-2": transcript.Cancelled}
	got := map[string]string{}
	for _, k := range b.Trials {
		tr, err := store.ReadTranscript(filepath.Join(results, filepath.FromSlash(store.TranscriptPath(k))))
		if err != nil {
			t.Errorf("trial %v has no transcript: %v", k, err)
			continue
		}
		got[k.Case] = tr.Outcome.Status
	}
	if diff := cmp.Diff(wantStatus, got); diff != "" {
		t.Errorf("statuses after a cancel (-want +got):\n%s", diff)
	}
}

// testReadinessFailure runs a shard whose server cannot start: RunShard
// fails with the worker's reason and no trial runs.
func testReadinessFailure(t *testing.T, h *Harness) {
	b := newBundle("ready", 0, 1, h.server(t, "--fail-start"), []dataset.Case{{ID: "c", Input: "Please echo 'x'"}}, []string{"v"}, 1, 1)
	results := t.TempDir()
	r := h.newRunner(t)
	rec := &events{}
	rep, err := r.RunShard(t.Context(), runner.Shard{Bundle: b, Results: results, Serve: h.coordinator(t, rec).Serve})
	if err == nil || !strings.Contains(err.Error(), "readiness") {
		t.Errorf("RunShard with a server that cannot start = %v, want the readiness check's error", err)
	}
	checkHello(t, h, 0, rep.Result.Hello)
	if files := transcriptFiles(t, results); len(files) > 0 {
		t.Errorf("transcripts after a failed readiness check: %v, want none", files)
	}
	if n := len(rec.counts()); n > 0 {
		t.Errorf("the coordinator was told of %d trials, want none", n)
	}
}

func checkHello(t *testing.T, h *Harness, i int, hello *shard.Hello) {
	t.Helper()
	if hello == nil {
		t.Errorf("shard %d: no hello came back", i)
		return
	}
	if hello.Protocol != shard.Protocol || hello.MSTVersion != h.MSTVersion || hello.Shard != i {
		t.Errorf("shard %d: hello {protocol %q, mstVersion %q, shard %d}, want {%q, %q, %d}",
			i, hello.Protocol, hello.MSTVersion, hello.Shard, shard.Protocol, h.MSTVersion, i)
	}
}

// params are the Params the suite gives Harness.New.
func (h *Harness) params(t *testing.T) runner.Params {
	logger := testLogger(t)
	return runner.Params{
		Options: map[string]string{}, Shards: h.Shards, Keep: runner.KeepNever, Logger: logger,
		Secrets: secrets.New(),
		Worker: &shard.Worker{
			Clients:     client.NewRegistry(api.Definition()),
			Environment: transcript.Environment{Runner: "runnertest", OS: runtime.GOOS, Arch: runtime.GOARCH},
			Logger:      logger, MSTVersion: h.MSTVersion, WorkDir: t.TempDir(),
		},
	}
}

// newRunner makes the runner for one check and closes it when the check
// ends.
func (h *Harness) newRunner(t *testing.T) runner.Runner {
	t.Helper()
	r, err := h.New(t, h.params(t))
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close after running shards = %v, want nil", err)
		}
	})
	return r
}

func (h *Harness) coordinator(t *testing.T, ev shard.Events) *shard.Coordinator {
	return &shard.Coordinator{MSTVersion: h.MSTVersion, Events: ev, Logger: testLogger(t), Secrets: secrets.New()}
}

// newBundle makes shard i's bundle: every case under every variant, trials
// times each, on the api client with the offline model.
func newBundle(runID string, i, shards int, srv servers.Server, cases []dataset.Case, variants []string, trials, conc int) *shard.Bundle {
	b := &shard.Bundle{
		Run: transcript.Run{
			Kind: "mst.run", Version: transcript.RunVersion, ID: "runnertest-" + runID, Eval: "runnertest",
			Variants: variants, Cases: len(cases), Trials: trials,
			Runner: transcript.RunnerInfo{Name: "runnertest", Shards: shards},
		},
		Shard: i, Cases: cases, Concurrency: conc,
	}
	for _, v := range variants {
		b.Variants = append(b.Variants, shard.Variant{Name: v, Client: "api", Model: "offline", Provider: "offline", Servers: []servers.Server{srv}})
	}
	for _, c := range cases {
		for _, v := range variants {
			for n := 1; n <= trials; n++ {
				b.Trials = append(b.Trials, transcript.Key{Case: c.ID, Variant: v, Trial: n})
			}
		}
	}
	return b
}

// transcriptFiles lists the transcript files under a run folder, as paths
// relative to it, sorted.
func transcriptFiles(t *testing.T, results string) []string {
	t.Helper()
	var files []string
	root := filepath.Join(results, "transcripts")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return fs.SkipDir
			}
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(results, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing transcripts: %v", err)
	}
	sort.Strings(files)
	return files
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func countKeys(m map[string]transcript.Key) map[transcript.Key]int {
	out := map[transcript.Key]int{}
	for _, k := range m {
		out[k]++
	}
	return out
}

// events records the trials the coordinator reports.
type events struct {
	mu   sync.Mutex
	seen map[transcript.Key]int
}

func (e *events) Trial(shardIndex int, m *shard.Trial) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = map[transcript.Key]int{}
	}
	e.seen[m.Key]++
}

func (e *events) counts() map[transcript.Key]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[transcript.Key]int{}
	for k, n := range e.seen {
		out[k] = n
	}
	return out
}

// message is the part of a worker message the suite watches.
type message struct {
	Type     string         `json:"type"`
	Key      transcript.Key `json:"key"`
	InFlight int            `json:"inFlight"`
}

// tap passes a worker's stdout through unchanged and shows fn each whole
// line as it goes by.
type tap struct {
	r    io.Reader
	fn   func(message)
	line []byte
}

func (t *tap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.line = append(t.line, p[:n]...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			break
		}
		var m message
		if json.Unmarshal(t.line[:i], &m) == nil {
			t.fn(m)
		}
		t.line = t.line[i+1:]
	}
	return n, err
}

// testLogger logs into a buffer that is shown when the test fails, so that
// workers logging after the test ended cannot break it.
func testLogger(t *testing.T) *slog.Logger {
	w := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", w.String())
		}
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *logBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
