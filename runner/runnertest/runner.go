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
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/builtin/client/api"
	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Harness says how the suite makes and drives the runner under test.
type Harness struct {
	// New makes the runner for one check. The suite fills p's Shards,
	// Keep (never), Logger, MSTVersion, InProcess (for runners that run
	// workers in this process), Secrets, and a short StopGrace and
	// Heartbeat; New adds
	// what the runner itself needs (MST, Options) and may change the rest.
	// The suite closes the runner.
	New func(t *testing.T, p runner.Params) (runner.Runner, error)
	// MSTVersion is the MST version the runner's workers run. The suite's
	// coordinator runs with it and checks that every hello reports it.
	MSTVersion string
	// Shards is how many shards the suite runs at once through one runner:
	// at least 1, at most the runner's MaxShards.
	Shards int
	// Server is the command that runs internal/testkit/testserver on the runner's
	// machines. Empty means this test binary, whose TestMain calls Serve.
	Server []string
}

// Heartbeat is how often the suite's workers send heartbeats.
const Heartbeat = 100 * time.Millisecond

// StopGrace is the stop grace the suite gives runners.
const StopGrace = 2 * time.Second

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
		r, err := h.New(t, h.params(t, store.OpenDir(t.TempDir(), nil)))
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close of a runner that ran nothing = %v, want nil", err)
		}
	})
}

// results is the coordinator's run folder of one check: transcripts
// fetched back are written into it, as the coordinator's caller does.
func newResults(t *testing.T) *store.DirRun {
	return store.OpenDir(t.TempDir(), nil)
}

// shardOf hands bundle b to a runner: written to a folder of its own, and
// served by coord, with the result kept in *res.
func shardOf(t *testing.T, b *shard.Bundle, coord *shard.Coordinator, wrap func(io.Reader) io.Reader, res *shard.ShardResult) runner.Shard {
	t.Helper()
	dir := t.TempDir()
	if err := shard.WriteBundle(dir, b); err != nil {
		t.Fatalf("writing the bundle: %v", err)
	}
	return runner.Shard{
		Index: b.Shard, Run: b.Run.ID, Attempt: 1, BundleDir: dir, HostPaths: run.HostPaths(b, ""),
		Serve: func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
			if wrap != nil {
				in = wrap(in)
			}
			var err error
			*res, err = coord.Serve(ctx, b.Shard, in, out, shard.Fetch(fetch))
			return err
		},
	}
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
	results := newResults(t)
	r := h.newRunner(t, results)
	rec := &events{results: results}
	coord := h.coordinator(t, rec)
	results_ := make([]shard.ShardResult, len(bundles))
	errs := make([]error, len(bundles))
	var wg sync.WaitGroup
	for i, b := range bundles {
		s := shardOf(t, b, coord, nil, &results_[i])
		wg.Go(func() {
			_, errs[i] = r.RunShard(t.Context(), s)
		})
	}
	wg.Wait()

	want := map[transcript.Key]int{}
	for i, b := range bundles {
		if errs[i] != nil {
			t.Errorf("RunShard(shard %d) = %v, want nil", i, errs[i])
			continue
		}
		checkHello(t, h, i, results_[i].Hello)
		if d := results_[i].Done; d == nil {
			t.Errorf("shard %d: no done message came back", i)
		} else if got, wantCounts := d.Counts, (transcript.Counts{Planned: b.Size(), Answered: b.Size()}); got != wantCounts {
			t.Errorf("shard %d: done counts = %+v, want %+v", i, got, wantCounts)
		}
		for _, k := range b.Keys() {
			want[k]++
		}
	}
	if diff := cmp.Diff(want, storedKeys(t, results)); diff != "" {
		t.Errorf("transcripts in the run folder (-want +got):\n%s", diff)
	}
	for k := range want {
		tr, err := results.ReadTranscript(t.Context(), k)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, store.ErrNotFound) {
			continue // reported above
		}
		if err != nil {
			t.Errorf("reading %v: %v", k, err)
			continue
		}
		var shardIndex, caseNo int
		fmt.Sscanf(k.Case, "s%d-c%d", &shardIndex, &caseNo)
		if tr.Key != k || tr.Shard != shardIndex || tr.Run != bundles[0].Run.ID {
			t.Errorf("%v: key %v, shard %d, run %q; want %v, %d, %q", k, tr.Key, tr.Shard, tr.Run, k, shardIndex, bundles[0].Run.ID)
		}
		if tr.Outcome.Status != transcript.Answered {
			t.Errorf("%v: status %s (%s), want answered", k, tr.Outcome.Status, tr.Outcome.Detail)
		}
		// The answer quotes the test server's echo, so the MCP server on
		// the machine really ran.
		if text := fmt.Sprintf("shard %d case %d", shardIndex, caseNo); !strings.Contains(tr.Answer, text) {
			t.Errorf("%v: answer %q does not quote the echoed %q", k, tr.Answer, text)
		}
	}
	if diff := cmp.Diff(want, rec.counts()); diff != "" {
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
	results := newResults(t)
	r := h.newRunner(t, results)
	coord := h.coordinator(t, &events{results: results})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The cancel goes out once the first trial is reported and a heartbeat
	// shows both naps past their acquire: from then on a nap can only end
	// cancelled, whatever the timing.
	var firstDone bool
	watch := func(m message) {
		switch {
		case m.Type == protocol.TypeTrial && m.Key.Case == "first":
			firstDone = true
		case m.Type == protocol.TypeHeartbeat && firstDone && m.InFlight >= 2:
			cancel()
		}
	}
	var res shard.ShardResult
	s := shardOf(t, b, coord, func(in io.Reader) io.Reader { return &tap{r: in, fn: watch} }, &res)
	if _, err := r.RunShard(ctx, s); err != nil {
		t.Fatalf("RunShard of a cancelled shard = %v, want nil (the worker still says done)", err)
	}
	if ctx.Err() == nil {
		t.Fatal("RunShard returned before the cancel")
	}
	if res.Done == nil {
		t.Fatal("a cancelled shard sent no done message")
	}
	if got, want := res.Done.Counts, (transcript.Counts{Planned: 3, Answered: 1, Cancelled: 2}); got != want {
		t.Errorf("done counts = %+v, want %+v", got, want)
	}
	wantStatus := map[string]string{"first": transcript.Answered, "nap-1": transcript.Cancelled, "nap-2": transcript.Cancelled}
	got := map[string]string{}
	for _, k := range b.Keys() {
		tr, err := results.ReadTranscript(t.Context(), k)
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
	results := newResults(t)
	r := h.newRunner(t, results)
	rec := &events{results: results}
	var res shard.ShardResult
	_, err := r.RunShard(t.Context(), shardOf(t, b, h.coordinator(t, rec), nil, &res))
	if err == nil || !strings.Contains(err.Error(), "readiness") {
		t.Errorf("RunShard with a server that cannot start = %v, want the readiness check's error", err)
	}
	checkHello(t, h, 0, res.Hello)
	if keys := storedKeys(t, results); len(keys) > 0 {
		t.Errorf("transcripts after a failed readiness check: %v, want none", keys)
	}
	if n := len(rec.counts()); n > 0 {
		t.Errorf("the coordinator was told of %d trials, want none", n)
	}
}

func checkHello(t *testing.T, h *Harness, i int, hello *protocol.Hello) {
	t.Helper()
	if hello == nil {
		t.Errorf("shard %d: no hello came back", i)
		return
	}
	if hello.Protocol != protocol.Protocol || hello.MSTVersion != h.MSTVersion || hello.Shard != i {
		t.Errorf("shard %d: hello {protocol %q, mstVersion %q, shard %d}, want {%q, %q, %d}",
			i, hello.Protocol, hello.MSTVersion, hello.Shard, protocol.Protocol, h.MSTVersion, i)
	}
}

// params are the Params the suite gives Harness.New. Its in-process worker
// writes into results, as the coordinator's does into the run's store.
func (h *Harness) params(t *testing.T, results store.Run) runner.Params {
	logger := testLogger(t)
	workDir := t.TempDir()
	return runner.Params{
		Options: map[string]string{}, Shards: h.Shards, Keep: runner.KeepNever, Logger: logger,
		MSTVersion: h.MSTVersion, Secrets: secrets.New(), StopGrace: StopGrace, Heartbeat: Heartbeat,
		InProcess: func(ctx context.Context, bundleDir string, in io.Reader, out io.Writer) error {
			b, err := shard.ReadBundle(bundleDir)
			if err != nil {
				return err
			}
			w := &shard.Worker{
				Clients:     client.NewRegistry(api.Definition(provider.NewRegistry(offline.Definition()))),
				Results:     results,
				Heartbeat:   Heartbeat,
				Environment: transcript.Environment{Runner: "runnertest", OS: runtime.GOOS, Arch: runtime.GOARCH},
				Logger:      logger, MSTVersion: h.MSTVersion, WorkDir: workDir,
			}
			return w.Run(ctx, b, in, out)
		},
	}
}

// newRunner makes the runner for one check and closes it when the check
// ends.
func (h *Harness) newRunner(t *testing.T, results store.Run) runner.Runner {
	t.Helper()
	r, err := h.New(t, h.params(t, results))
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
		b.Settings = append(b.Settings, shard.Setting{Variant: v, Client: "api", Model: "offline", Provider: "offline", Servers: []servers.Server{srv}})
	}
	for _, c := range cases {
		for si, v := range variants {
			for n := 1; n <= trials; n++ {
				b.Add(shard.Planned{Key: transcript.Key{Case: c.ID, Variant: v, Trial: n}, Setting: si})
			}
		}
	}
	return b
}

// storedKeys counts the transcripts in the run folder, by key.
func storedKeys(t *testing.T, results store.Run) map[transcript.Key]int {
	t.Helper()
	out := map[transcript.Key]int{}
	err := results.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		out[tr.Key]++
		return nil
	})
	if err != nil {
		t.Fatalf("listing transcripts: %v", err)
	}
	return out
}

// events records the trials the coordinator reports, and writes the
// transcripts fetched back into results, as the coordinator's caller does.
type events struct {
	results store.Run
	mu      sync.Mutex
	seen    map[transcript.Key]int
}

func (e *events) Trial(shardIndex int, m *protocol.Trial, data []byte) {
	if data != nil {
		if tr, err := transcript.Decode(data); err == nil {
			e.results.WriteTranscript(context.Background(), tr)
		}
	}
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
