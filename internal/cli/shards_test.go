package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// These tests run `mst run --runner processes` in-process: the coordinator
// is cli.Main, and each worker is this test binary started again under the
// name mst (TestMain dispatches on it), so the whole protocol, the child
// processes and the copies back are real.

// mstOutcome is what one in-process mst command did.
type mstOutcome struct {
	code           int
	stdout, stderr string
}

func execMST(t *testing.T, args ...string) mstOutcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), args, cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr, Env: os.Environ()})
	return mstOutcome{code, stdout.String(), stderr.String()}
}

// onlyRunFolder returns the one run folder under results.
func onlyRunFolder(t *testing.T, results string) string {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("run folders in %s: %v, want one", results, runs)
	}
	return filepath.Dir(runs[0])
}

func readRunJSON(t *testing.T, dir string) transcript.Run {
	t.Helper()
	st, err := store.OpenRunDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.ReadRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// listTranscripts lists the trials that have a transcript in a run
// folder (as variant/case#trial), through the store.
func listTranscripts(t *testing.T, dir string) []string {
	t.Helper()
	keys, err := store.OpenDir(dir, nil).Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

// providerGate stands in front of a fake provider and holds the model requests
// whose conversation holds a marker until the marker is released or the
// client goes away; other requests pass straight through.
type providerGate struct {
	URL      string
	arrivals chan string

	mu       sync.Mutex
	holding  bool
	released map[string]chan struct{}
}

func newProviderGate(t *testing.T, target string, markers ...string) *providerGate {
	g := &providerGate{arrivals: make(chan string, 64), holding: true, released: map[string]chan struct{}{}}
	for _, m := range markers {
		g.released[m] = make(chan struct{})
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		g.mu.Lock()
		holding := g.holding
		g.mu.Unlock()
		for marker, release := range g.released {
			if holding && bytes.Contains(body, []byte(marker)) {
				g.arrivals <- marker
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

func (g *providerGate) release(marker string) { close(g.released[marker]) }

func (g *providerGate) open() {
	g.mu.Lock()
	g.holding = false
	g.mu.Unlock()
}

// TestShardsWorkerKilled kills one worker with SIGKILL while two of its
// trials are in flight. The run ends partial with exactly those two
// missing, the other shards finish, and --resume then completes the run:
// every planned trial has one transcript and run.json lists the machines of
// both attempts.
func TestShardsWorkerKilled(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		t.Run("shards="+strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			testWorkerKilled(t, n)
		})
	}
}

func testWorkerKilled(t *testing.T, shards int) {
	dir := t.TempDir()
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "all done"}}}}})
	g := newProviderGate(t, fake.URL, "HOLD-victim", "HOLD-other")

	// The victim case runs on the shard whose worker is killed; the other
	// held case on another shard, which must finish after the kill. The
	// split deals the whole set of cases (run.CaseShards), so where a case
	// goes is worked out for each candidate set.
	var where map[string]int
	other := ""
	for i := 0; other == ""; i++ {
		id := fmt.Sprintf("wait-%d", i)
		var keys []transcript.Key
		for _, c := range append([]string{"slow", id}, splitQIDs...) {
			keys = append(keys, transcript.Key{Case: c, Variant: "v", Trial: 1}, transcript.Key{Case: c, Variant: "v", Trial: 2})
		}
		if where = run.CaseShards(keys, shards); where[id] != where["slow"] {
			other = id
		}
	}
	victim := where["slow"]
	cases := []string{`{"id": "slow", "input": "HOLD-victim: answer when you can"}`, fmt.Sprintf(`{"id": %q, "input": "HOLD-other: answer when you can"}`, other)}
	ids := []string{"slow", other}
	for _, id := range splitQIDs {
		ids = append(ids, id)
		cases = append(cases, fmt.Sprintf(`{"id": %q, "input": "say hello to %s"}`, id, id))
	}
	writeTestFile(t, dir, "cases.jsonl", strings.Join(cases, "\n")+"\n")
	writeTestFile(t, dir, "eval.yaml", fmt.Sprintf(`name: killed
datasets: [cases.jsonl]
servers:
  test: {command: %q}
variants:
  v: {model: anthropic/claude-test, clientOptions: {baseURL: %q}}
trials: 2
limits: {concurrency: 4}
`, testServerCommand(t, dir), g.URL))
	writeTestFile(t, dir, "secrets.env", "ANTHROPIC_API_KEY=test-key-for-the-fake-provider\n")
	shardsDir := filepath.Join(dir, "shards")
	results := filepath.Join(dir, "results")
	args := []string{"--runner", "processes", "--runner-option", "shards=" + strconv.Itoa(shards),
		"--runner-option", "dir=" + shardsDir, "--secrets-file", filepath.Join(dir, "secrets.env"), "--results", results}
	planned := 2 * len(ids)

	done := make(chan mstOutcome, 1)
	go func() { done <- execMST(t, append([]string{"run", filepath.Join(dir, "eval.yaml")}, args...)...) }()
	failEarly := func(what string) {
		t.Helper()
		select {
		case res := <-done:
			t.Fatalf("the run ended while %s: exit %d\n%s", what, res.code, res.stderr)
		default:
		}
	}
	// Both trials of each held case reach the provider and wait there.
	for held := 0; held < 4; {
		select {
		case <-g.arrivals:
			held++
		case res := <-done:
			t.Fatalf("the run ended before its held trials started: exit %d\n%s", res.code, res.stderr)
		}
	}
	// Every other trial ends, so the victim has exactly its held trials in
	// flight when it dies.
	for {
		failEarly("waiting for the quick trials")
		if runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "run.json")); len(runs) == 1 && len(listTranscripts(t, filepath.Dir(runs[0]))) == planned-4 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid := workerPID(t, filepath.Join(shardsDir, "shard-"+strconv.Itoa(victim)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing worker %d: %v", pid, err)
	}
	g.release("HOLD-other")
	res := <-done
	if res.code != int(cli.ExitPartial) {
		t.Fatalf("mst run with a killed worker exited %d, want %d (a partial run)\n%s", res.code, int(cli.ExitPartial), res.stderr)
	}
	runDir := onlyRunFolder(t, results)
	rec := readRunJSON(t, runDir)
	if rec.Collect != transcript.CollectPartial || rec.Counts.Missing != 2 || rec.Counts.Answered != planned-2 {
		t.Errorf("after the kill: collect %s, counts %+v; want partial, 2 missing, %d answered", rec.Collect, rec.Counts, planned-2)
	}
	want := map[string]bool{}
	for _, id := range ids {
		for n := 1; n <= 2; n++ {
			want[transcript.Key{Case: id, Variant: "v", Trial: n}.String()] = true
		}
	}
	wantAfterKill := map[string]bool{}
	for p := range want {
		if !strings.Contains(p, "/slow#") {
			wantAfterKill[p] = true
		}
	}
	if diff := cmp.Diff(sortedPaths(wantAfterKill), listTranscripts(t, runDir)); diff != "" {
		t.Errorf("transcripts after the kill (-want +got):\n%s", diff)
	}
	ended := map[int]string{}
	for _, m := range rec.Runner.Machines {
		ended[m.Shard] = m.Ended
		// The death is noticed through the channel closing, not through
		// a minute of silence.
		if m.Shard == victim && !strings.Contains(m.Error, "channel closed") {
			t.Errorf("the killed shard's error = %q, want its channel closed", m.Error)
		}
	}
	wantEnded := map[int]string{}
	for _, id := range ids {
		wantEnded[where[id]] = "done"
	}
	wantEnded[victim] = "lost"
	if diff := cmp.Diff(wantEnded, ended); diff != "" {
		t.Errorf("how each shard ended (-want +got):\n%s", diff)
	}

	// Resume with the same eval file: only the victim's two trials run.
	g.open()
	res = execMST(t, append([]string{"run", "--resume", runDir, filepath.Join(dir, "eval.yaml")}, args...)...)
	if res.code != 0 {
		t.Fatalf("mst run --resume exited %d\n%s", res.code, res.stderr)
	}
	rec = readRunJSON(t, runDir)
	if rec.Collect != transcript.CollectComplete || rec.Counts != (transcript.Counts{Planned: planned, Answered: planned}) || rec.Resumes != 1 {
		t.Errorf("after --resume: collect %s, counts %+v, resumes %d; want complete, all %d answered, 1", rec.Collect, rec.Counts, rec.Resumes, planned)
	}
	if diff := cmp.Diff(sortedPaths(want), listTranscripts(t, runDir)); diff != "" {
		t.Errorf("transcripts after --resume (-want +got):\n%s", diff)
	}
	type attemptShard struct{ Attempt, Shard, Trials int }
	var got []attemptShard
	for _, m := range rec.Runner.Machines {
		got = append(got, attemptShard{m.Attempt, m.Shard, m.Trials})
	}
	var wantMachines []attemptShard
	perShard := map[int]int{}
	for _, id := range ids {
		perShard[where[id]] += 2
	}
	for s, n := range perShard {
		wantMachines = append(wantMachines, attemptShard{1, s, n})
	}
	wantMachines = append(wantMachines, attemptShard{2, victim, 2})
	less := func(a, b attemptShard) bool {
		return a.Attempt < b.Attempt || a.Attempt == b.Attempt && a.Shard < b.Shard
	}
	if diff := cmp.Diff(wantMachines, got, cmpopts.SortSlices(less)); diff != "" {
		t.Errorf("run.json machines over both attempts (-want +got):\n%s", diff)
	}
	seen := map[transcript.Key]int{}
	err := store.OpenDir(runDir, nil).Grades(t.Context(), func(g grade.TrialGrade) error {
		if g.Trial.Status != transcript.Answered || !g.Graded {
			t.Errorf("the grade of %v: %+v, want an answered, graded trial", g.Key, g)
		}
		seen[g.Key]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != planned {
		t.Errorf("the run grades %d trials, want %d", len(seen), planned)
	}
}

// splitQIDs are the quick cases of testWorkerKilled.
var splitQIDs = []string{"q01", "q02", "q03", "q04", "q05", "q06", "q07", "q08", "q09", "q10"}

// workerPID finds the one `mst collect` whose bundle is in shardDir, with
// pgrep, so only this test's worker is ever signalled.
func workerPID(t *testing.T, shardDir string) int {
	t.Helper()
	out, err := exec.Command("pgrep", "-f", regexp.QuoteMeta("mst collect --bundle "+shardDir+string(filepath.Separator))).Output()
	if err != nil {
		t.Fatalf("pgrep for the worker of %s: %v", shardDir, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 1 {
		t.Fatalf("pgrep for the worker of %s found %q, want one process", shardDir, fields)
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestShardsProviderLimit runs 4 shards under a limit of 2 trials in
// flight for the provider: the fake provider never sees more than 2
// requests at once, and every trial is answered.
func TestShardsProviderLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := providertest.New(t, providertest.Script{
		Latency:       100 * time.Millisecond,
		Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "ok"}}}},
	})
	var cases []string
	var keys []transcript.Key
	for i := 1; i <= 16; i++ {
		id := fmt.Sprintf("c%02d", i)
		keys = append(keys, transcript.Key{Case: id, Variant: "v", Trial: 1})
		cases = append(cases, fmt.Sprintf(`{"id": %q, "input": "say hello to %s"}`, id, id))
	}
	shardsUsed := map[int]bool{}
	for _, s := range run.CaseShards(keys, 4) {
		shardsUsed[s] = true
	}
	writeTestFile(t, dir, "cases.jsonl", strings.Join(cases, "\n")+"\n")
	writeTestFile(t, dir, "eval.yaml", fmt.Sprintf(`name: limited
datasets: [cases.jsonl]
servers:
  test: {command: %q}
variants:
  v: {model: anthropic/claude-test, clientOptions: {baseURL: %q}}
limits:
  concurrency: 4
  providers: {anthropic: 2}
`, testServerCommand(t, dir), fake.URL))
	writeTestFile(t, dir, "secrets.env", "ANTHROPIC_API_KEY=test-key-for-the-fake-provider\n")
	results := filepath.Join(dir, "results")
	res := execMST(t, "run", filepath.Join(dir, "eval.yaml"), "--runner", "processes", "--runner-option", "shards=4",
		"--runner-option", "dir="+filepath.Join(dir, "shards"), "--secrets-file", filepath.Join(dir, "secrets.env"), "--results", results)
	if res.code != 0 {
		t.Fatalf("mst run exited %d\n%s", res.code, res.stderr)
	}
	rec := readRunJSON(t, onlyRunFolder(t, results))
	if rec.Counts != (transcript.Counts{Planned: 16, Answered: 16}) {
		t.Errorf("counts = %+v, want all 16 answered", rec.Counts)
	}
	if len(rec.Runner.Machines) != len(shardsUsed) || len(shardsUsed) < 3 {
		t.Errorf("%d machines ran, want %d (at least 3, for the limit to span shards)", len(rec.Runner.Machines), len(shardsUsed))
	}
	if n := fake.MaxInFlight(); n > 2 {
		t.Errorf("the provider saw %d requests at once, want at most 2 (limits.providers.anthropic)", n)
	}
	if n := len(fake.Requests()); n != 16 {
		t.Errorf("the provider answered %d requests, want 16", n)
	}
}

// TestShardsQuickstartParity runs the quickstart locally and on 4 shards of
// the processes runner: the pass rates agree, variant by variant.
func TestShardsQuickstartParity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	qs := filepath.Join(dir, "examples", "quickstart")
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", f))
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, qs, f, string(b))
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "weather"), "github.com/mst-eval/mst/examples/quickstart/weather")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the weather server: %v\n%s", err, out)
	}
	type rate struct {
		PassRate       *float64
		Passed, Graded int
	}
	rates := func(args ...string) map[string]rate {
		t.Helper()
		res := execMST(t, append([]string{"run", filepath.Join(qs, "eval.yaml"), "--json"}, args...)...)
		if res.code != 0 {
			t.Fatalf("mst run %q exited %d\n%s", args, res.code, res.stderr)
		}
		var rep struct {
			Variants []struct {
				Variant  string   `json:"variant"`
				PassRate *float64 `json:"passRate"`
				Passed   int      `json:"passed"`
				Graded   int      `json:"graded"`
			} `json:"variants"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
			t.Fatalf("report JSON: %v\n%s", err, res.stdout)
		}
		out := map[string]rate{}
		for _, v := range rep.Variants {
			out[v.Variant] = rate{v.PassRate, v.Passed, v.Graded}
		}
		return out
	}
	local := rates("--results", filepath.Join(dir, "local"))
	sharded := rates("--results", filepath.Join(dir, "sharded"), "--runner", "processes", "--runner-option", "shards=4")
	if len(local) != 2 || local["terse"].Graded != 42 {
		t.Fatalf("local quickstart report = %+v, want two variants of 42 graded trials", local)
	}
	if diff := cmp.Diff(local, sharded); diff != "" {
		t.Errorf("pass rates, local (-) against 4 shards (+):\n%s", diff)
	}
}

func writeTestFile(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sortedPaths(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
