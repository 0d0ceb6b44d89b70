package run_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// splitEval is an eval of the quickstart's fourteen case ids, one
// variant, two trials each, on the test server.
func splitEval(t *testing.T) string {
	t.Helper()
	var cases strings.Builder
	for _, c := range quickstartCases {
		fmt.Fprintf(&cases, "{\"id\": %q, \"input\": \"Please echo '%s'\"}\n", c, c)
	}
	return writeEval(t, map[string]string{
		"eval.yaml": `
name: split
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
trials: 2
`,
		"cases.jsonl": cases.String(),
	})
}

// splitOnProcesses runs on n shards of the processes runner.
func splitOnProcesses(t *testing.T, n int) func(*run.Options) {
	return func(o *run.Options) {
		o.Runner = runner.ProcessesDefinition()
		o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: n, Keep: runner.KeepNever}
	}
}

// splitResumeOn resumes the stored run st on n processes shards.
func splitResumeOn(t *testing.T, path string, st store.Run, n int) (*run.Plan, *run.Outcome) {
	t.Helper()
	rp := resumePlan(t, path, reopen(t, st), false)
	o := options(nil)
	splitOnProcesses(t, n)(&o)
	out, err := run.Execute(t.Context(), rp, o)
	if err != nil {
		t.Fatalf("Execute(--resume on %d shards) = %v", n, err)
	}
	return rp, out
}

// splitRanOn returns the shard each case of keys ran on, from the transcripts,
// and fails the test when one case's trials ran on several shards.
func splitRanOn(t *testing.T, st store.Run, keys []transcript.Key) map[string]int {
	t.Helper()
	r, err := store.OpenRunDir(st.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, k := range keys {
		tr, err := r.ReadTranscript(t.Context(), k)
		if err != nil {
			t.Fatalf("reading the transcript of %v: %v", k, err)
		}
		if s, ok := out[k.Case]; ok && s != tr.Shard {
			t.Errorf("case %s ran on shards %d and %d, want one shard for all its trials", k.Case, s, tr.Shard)
		}
		out[k.Case] = tr.Shard
	}
	return out
}

// splitLose removes the transcripts of every trial of cases (their grades stay).
func splitLose(t *testing.T, st store.Run, keys []transcript.Key, cases []string) []transcript.Key {
	t.Helper()
	var gone []transcript.Key
	for _, k := range keys {
		if slices.Contains(cases, k.Case) {
			gone = append(gone, k)
			if err := os.Remove(filepath.Join(st.Location(), "transcripts", k.Variant, fmt.Sprintf("%s.t%d.json", k.Case, k.Trial))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return gone
}

// splitAttemptTrials sums, by shard, the trials run.json's machines of one
// attempt were given.
func splitAttemptTrials(rec transcript.Run, attempt int) map[int]int {
	out := map[int]int{}
	for _, m := range rec.Runner.Machines {
		if m.Attempt == attempt {
			out[m.Shard] += m.Trials
		}
	}
	return out
}

// TestResumeKeepsRecordedSplit runs fourteen cases on two processes
// shards: the cases are dealt 7/7, each case on one shard, and run.json
// records the split. A resume on two shards runs the lost cases where
// run.json says (three of shard 0 and one of shard 1, which a fresh deal
// would spread 2/2); a resume on three shards deals them afresh over
// three, and the recorded split stays.
func TestResumeKeepsRecordedSplit(t *testing.T) {
	t.Parallel()
	path := splitEval(t)
	p, out, _ := newRun(t, path, splitOnProcesses(t, 2))
	rec, err := out.Store.ReadRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantSplit := transcript.Split{Method: transcript.SplitDeal, Shards: 2, Digest: "1eeb989c08968c7d"}
	if rec.Runner.Split == nil || *rec.Runner.Split != wantSplit {
		t.Fatalf("run.json's runner.split = %+v, want %+v", rec.Runner.Split, wantSplit)
	}
	if !slices.Equal(rec.Runner.ShardTrials, []int{14, 14}) {
		t.Errorf("run.json's runner.shardTrials = %v, want [14 14]", rec.Runner.ShardTrials)
	}
	first := splitRanOn(t, out.Store, p.Keys())
	dealt := run.CaseShards(p.Keys(), 2)
	for c, s := range first {
		if dealt[c] != s {
			t.Errorf("case %s ran on shard %d, want %d (the deal's)", c, s, dealt[c])
		}
	}
	var onZero, onOne []string
	for _, c := range quickstartCases {
		if first[c] == 0 {
			onZero = append(onZero, c)
		} else {
			onOne = append(onOne, c)
		}
	}
	lost := append(onZero[:3:3], onOne[0])
	if fresh := run.ShardTrials(splitLose(t, out.Store, p.Keys(), lost), 2); !slices.Equal(fresh, []int{4, 4}) {
		t.Fatalf("a fresh deal of the lost cases gives %v trials by shard; the test needs one that differs from the recorded split's [6 2]", fresh)
	}

	rp, res := splitResumeOn(t, path, out.Store, 2)
	if res.Run.Collect != transcript.CollectComplete {
		t.Fatalf("the resume on 2 shards ended %s, want complete", res.Run.Collect)
	}
	again := splitRanOn(t, out.Store, rp.Todo())
	for c, s := range again {
		if s != first[c] {
			t.Errorf("the resume on 2 shards ran case %s on shard %d, want %d where run.json's split put it", c, s, first[c])
		}
	}
	rec, err = out.Store.ReadRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := splitAttemptTrials(rec, 2); fmt.Sprint(got) != fmt.Sprint(map[int]int{0: 6, 1: 2}) {
		t.Errorf("the resume on 2 shards gave its machines %v trials by shard, want map[0:6 1:2]", got)
	}
	if rec.Runner.Split == nil || *rec.Runner.Split != wantSplit {
		t.Errorf("after the resume on 2 shards, run.json's runner.split = %+v, want %+v as recorded", rec.Runner.Split, wantSplit)
	}

	// Another shard count: the lost cases are dealt afresh over three,
	// 2/1/1 cases, each on one shard; the recorded split stays the first
	// attempt's, and shardTrials is what three shards give the whole run.
	splitLose(t, out.Store, p.Keys(), lost)
	rp, res = splitResumeOn(t, path, out.Store, 3)
	if res.Run.Collect != transcript.CollectComplete {
		t.Fatalf("the resume on 3 shards ended %s, want complete", res.Run.Collect)
	}
	again = splitRanOn(t, out.Store, rp.Todo())
	if want := run.CaseShards(rp.Todo(), 3); fmt.Sprint(again) != fmt.Sprint(want) {
		t.Errorf("the resume on 3 shards ran the lost cases on %v, want %v (dealt afresh over 3)", again, want)
	}
	rec, err = out.Store.ReadRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := splitAttemptTrials(rec, 3); fmt.Sprint(got) != fmt.Sprint(map[int]int{0: 4, 1: 2, 2: 2}) {
		t.Errorf("the resume on 3 shards gave its machines %v trials by shard, want map[0:4 1:2 2:2]", got)
	}
	if rec.Runner.Split == nil || *rec.Runner.Split != wantSplit {
		t.Errorf("after the resume on 3 shards, run.json's runner.split = %+v, want %+v as recorded", rec.Runner.Split, wantSplit)
	}
	if want := run.ShardTrials(p.Keys(), 3); !slices.Equal(rec.Runner.ShardTrials, want) {
		t.Errorf("after the resume on 3 shards, run.json's runner.shardTrials = %v, want %v", rec.Runner.ShardTrials, want)
	}
}

// TestResumeOldRunSplit resumes a run whose run.json has no split, as MST
// wrote before it recorded one: such runs were split by fnv64a(case id)
// mod the shard count, so a resume on as many shards runs each lost case
// on that shard, and run.json then records that rule.
func TestResumeOldRunSplit(t *testing.T) {
	t.Parallel()
	path := splitEval(t)
	p, out, _ := newRun(t, path, splitOnProcesses(t, 2))
	dir, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := dir.ReadRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rec.Runner.Split = nil
	if err := dir.WriteRun(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out.Store.Location(), "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := transcript.DecodeRun(b)
	if err != nil {
		t.Fatal(err)
	}
	wantSplit := transcript.Split{Method: transcript.SplitMod, Shards: 2}
	if got := old.Runner.RecordedSplit(); got != wantSplit {
		t.Fatalf("RecordedSplit() of a run.json without a split = %+v, want %+v", got, wantSplit)
	}
	// Lose the cases the deal put elsewhere than the hash mod 2 does.
	first := splitRanOn(t, out.Store, p.Keys())
	var moved []string
	for _, c := range quickstartCases {
		if first[c] != shard.Assign(c, 2) {
			moved = append(moved, c)
		}
	}
	if len(moved) == 0 {
		t.Fatal("the deal and the hash mod 2 agree on every case; the test needs cases where they differ")
	}
	splitLose(t, out.Store, p.Keys(), moved)
	rp, res := splitResumeOn(t, path, out.Store, 2)
	if res.Run.Collect != transcript.CollectComplete {
		t.Fatalf("the resume ended %s, want complete", res.Run.Collect)
	}
	for c, s := range splitRanOn(t, out.Store, rp.Todo()) {
		if want := shard.Assign(c, 2); s != want {
			t.Errorf("the resume of an old run ran case %s on shard %d, want %d (fnv64a mod 2)", c, s, want)
		}
	}
	rec, err = dir.ReadRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Runner.Split == nil || *rec.Runner.Split != wantSplit {
		t.Errorf("after resuming an old run, run.json's runner.split = %+v, want %+v", rec.Runner.Split, wantSplit)
	}
}
