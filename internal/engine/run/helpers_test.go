package run_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// writeEval writes files into a new folder and returns the path of its
// eval.yaml. SERVER in a file stands for the test server's path.
func writeEval(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "SERVER", testServer)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "eval.yaml")
}

// request is the plan request of this build's registries for a config,
// as the CLI makes it for the local runner.
func request(path string) run.Request {
	clients := builtin.Clients()
	return run.Request{
		ConfigFile: path, OS: runner.LocalDefinition().OS, ThisMachine: true,
		Clients: clients, Providers: builtin.Providers(),
		Secrets: secrets.New(),
	}
}

// options are the options of a local run into st.
func options(st store.Store) run.Options {
	return run.Options{
		Store: st, Clients: builtin.Clients(), Runner: runner.LocalDefinition(),
		Chosen:     run.RunnerChoice{Options: map[string]string{}, Shards: 1, Keep: runner.KeepNever},
		Secrets:    secrets.New(),
		MSTVersion: testVersion, MST: []string{mstCommand},
	}
}

// countingStore is a store whose runs count what is done to them.
type countingStore struct {
	store.Store
	mu   sync.Mutex
	runs []*countingRun
}

func (s *countingStore) Create(ctx context.Context, id string, redact *secrets.Redactor) (store.Run, error) {
	r, err := s.Store.Create(ctx, id, redact)
	if err != nil {
		return nil, err
	}
	cr := newCountingRun(r)
	s.mu.Lock()
	s.runs = append(s.runs, cr)
	s.mu.Unlock()
	return cr, nil
}

// only returns the one run created in s.
func (s *countingStore) only(t *testing.T) *countingRun {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.runs) != 1 {
		t.Fatalf("the store holds %d runs, want 1", len(s.runs))
	}
	return s.runs[0]
}

// countingRun counts, per trial, the grades appended and the transcripts
// read, written and replaced. With drop set, grades of the keys it holds
// are dropped rather than stored (as if the process died before storing
// them).
type countingRun struct {
	store.Run
	mu       sync.Mutex
	grades   map[transcript.Key]int
	reads    map[transcript.Key]int
	writes   map[transcript.Key]int
	replaces map[transcript.Key]int
	drop     func(transcript.Key) bool
}

func newCountingRun(r store.Run) *countingRun {
	return &countingRun{Run: r, grades: map[transcript.Key]int{}, reads: map[transcript.Key]int{}, writes: map[transcript.Key]int{}, replaces: map[transcript.Key]int{}}
}

// reset zeroes the counts.
func (r *countingRun) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grades, r.reads, r.writes, r.replaces = map[transcript.Key]int{}, map[transcript.Key]int{}, map[transcript.Key]int{}, map[transcript.Key]int{}
}

func (r *countingRun) count(m map[transcript.Key]int, k transcript.Key) {
	r.mu.Lock()
	m[k]++
	r.mu.Unlock()
}

// counts returns a copy of one of the counts.
func (r *countingRun) counts(which func(*countingRun) map[transcript.Key]int) map[transcript.Key]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[transcript.Key]int{}
	for k, n := range which(r) {
		out[k] = n
	}
	return out
}

func appended(r *countingRun) map[transcript.Key]int { return r.grades }
func read(r *countingRun) map[transcript.Key]int     { return r.reads }
func written(r *countingRun) map[transcript.Key]int  { return r.writes }
func replaced(r *countingRun) map[transcript.Key]int { return r.replaces }

func (r *countingRun) AppendGrades(ctx context.Context, gs ...grade.TrialGrade) error {
	var keep []grade.TrialGrade
	for _, g := range gs {
		if r.drop != nil && r.drop(g.Key) {
			continue
		}
		r.count(r.grades, g.Key)
		keep = append(keep, g)
	}
	return r.Run.AppendGrades(ctx, keep...)
}

func (r *countingRun) ReadTranscript(ctx context.Context, k transcript.Key) (*transcript.Transcript, error) {
	r.count(r.reads, k)
	return r.Run.ReadTranscript(ctx, k)
}

func (r *countingRun) WriteTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	r.count(r.writes, t.Key)
	return r.Run.WriteTranscript(ctx, t)
}

func (r *countingRun) ReplaceTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	r.count(r.replaces, t.Key)
	return r.Run.ReplaceTranscript(ctx, t)
}

// each returns a count of n for every key.
func each(keys []transcript.Key, n int) map[transcript.Key]int {
	m := map[transcript.Key]int{}
	for _, k := range keys {
		m[k] = n
	}
	return m
}

// latestGrades returns the latest grade of every key in st.
func latestGrades(t *testing.T, st store.Run) map[transcript.Key]grade.TrialGrade {
	t.Helper()
	out := map[transcript.Key]grade.TrialGrade{}
	err := st.Grades(t.Context(), func(g grade.TrialGrade) error {
		out[g.Key] = g
		return nil
	})
	if err != nil {
		t.Fatalf("Grades() = %v", err)
	}
	return out
}

// keyLess orders keys by variant, case and trial.
func keyLess(a, b transcript.Key) bool {
	if a.Variant != b.Variant {
		return a.Variant < b.Variant
	}
	if a.Case != b.Case {
		return a.Case < b.Case
	}
	return a.Trial < b.Trial
}

var (
	cmpSortKeys    = cmpopts.SortSlices(keyLess)
	cmpSortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })
)

// wrapRunner is def whose runners are wrapped by wrap, for tests that
// watch what a runner's shards do.
func wrapRunner(def *runner.Definition, wrap func(runner.Runner) runner.Runner) *runner.Definition {
	d := *def
	inner := d.New
	d.New = func(ctx context.Context, p runner.Params) (runner.Runner, error) {
		r, err := inner(ctx, p)
		if err != nil {
			return nil, err
		}
		return wrap(r), nil
	}
	return &d
}
