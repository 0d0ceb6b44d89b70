package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// gradeEvents keeps what a coordinator hands on from grade shards.
type gradeEvents struct {
	mu     sync.Mutex
	graded map[transcript.Key]grade.TrialGrade
	bad    []string
}

func (e *gradeEvents) Graded(_ int, m *protocol.Graded, data []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var g grade.TrialGrade
	if err := json.Unmarshal(data, &g); err != nil || g.Key != m.Key {
		e.bad = append(e.bad, m.Key.String())
		return
	}
	if e.graded == nil {
		e.graded = map[transcript.Key]grade.TrialGrade{}
	}
	e.graded[m.Key] = g
}

// gradeBundle writes a grade bundle for ts into a new folder: each
// transcript where the worker reads it, and the bundle itself.
func gradeBundle(t *testing.T, work *shard.GradeWork, ts ...*transcript.Transcript) (string, *shard.Bundle) {
	t.Helper()
	dir := t.TempDir()
	for _, tr := range ts {
		data, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(shard.GradeTranscript(tr.Key)))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		work.Trials = append(work.Trials, tr.Key)
	}
	b := &shard.Bundle{Run: transcript.Run{ID: "grade-test"}, Work: shard.WorkGrade, Grade: work}
	if err := shard.WriteBundle(dir, b); err != nil {
		t.Fatal(err)
	}
	b, err := shard.ReadBundle(dir)
	if err != nil {
		t.Fatalf("ReadBundle = %v", err)
	}
	return dir, b
}

func trialOf(k transcript.Key, status, prompt, answer string) *transcript.Transcript {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Run: "grade-test", Key: k, Prompt: prompt, Answer: answer,
		Timing:  transcript.Timing{Started: now, Ended: now.Add(time.Second), DurationMs: 1000},
		Outcome: transcript.Outcome{Status: status},
	}
}

// runGradePipes runs a GradeWorker and Serve together over pipes, the way
// a machine runner does, with a fetch from the worker's results folder.
func runGradePipes(ctx context.Context, w *shard.GradeWorker, dir string, b *shard.Bundle, coord *shard.Coordinator) (shard.ShardResult, error) {
	toWorker, fromCoordinator := io.Pipe()
	fromWorker, toCoordinator := io.Pipe()
	workerErr := make(chan error, 1)
	go func() {
		err := w.Run(context.WithoutCancel(ctx), b, dir, toWorker, toCoordinator)
		toCoordinator.Close()
		toWorker.Close()
		workerErr <- err
	}()
	fetch := func(_ context.Context, p string) ([]byte, error) {
		return os.ReadFile(filepath.Join(w.Results, filepath.FromSlash(p)))
	}
	res, err := coord.Serve(ctx, b.Shard, fromWorker, fromCoordinator, fetch)
	fromCoordinator.Close()
	go io.Copy(io.Discard, fromWorker)
	if werr := <-workerErr; err == nil && werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = werr
	}
	return res, err
}

// TestGradeWorker grades a shard of stored transcripts with the
// eval-level graders and a case's own judge: deterministic verdicts, a
// judge that reaches the fake provider with the key the coordinator sent
// (and only that key), trials that never get graded (errored), long and
// Unicode ids, and a cap of one judge at a time per provider.
func TestGradeWorker(t *testing.T) {
	const judgeKey = "canary-grade-judge-55e0"
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
		providertest.JudgeConversation("rain in Oslo", providertest.JudgeReply{Verdict: "pass", Score: 5, Rationale: "matches the forecast"}.Turn()),
		providertest.JudgeConversation("Tokyo", providertest.JudgeReply{Verdict: "fail", Score: 1, Rationale: "made up"}.Turn()),
	}})
	judge := `{"judge": {"rubric": "supported", "model": "anthropic/claude-judge", "baseURL": "` + fake.URL + `", "apiKeyEnv": "JUDGE_KEY"}}`
	long := strings.Repeat("長い-", 60)
	work := &shard.GradeWork{
		Graders: []json.RawMessage{json.RawMessage(`{"answerContains": {"text": "rain", "ignoreCase": true}}`)},
		Cases: []shard.GradeCase{
			{ID: "oslo", Expect: []json.RawMessage{json.RawMessage(judge)}},
			{ID: long, Expect: []json.RawMessage{json.RawMessage(judge)}},
			{ID: "plain"},
		},
	}
	ts := []*transcript.Transcript{
		trialOf(transcript.Key{Case: "oslo", Variant: "v", Trial: 1}, transcript.Answered, "Will there be rain in Oslo?", "Rain, 12°C."),
		trialOf(transcript.Key{Case: "oslo", Variant: "v", Trial: 2}, transcript.Errored, "Will there be rain in Oslo?", ""),
		trialOf(transcript.Key{Case: long, Variant: "ü", Trial: 1}, transcript.Answered, "And in Tokyo?", "Rain and a typhoon."),
		trialOf(transcript.Key{Case: "plain", Variant: "v", Trial: 1}, transcript.Answered, "Sunny?", "Sunny all day."),
	}
	dir, b := gradeBundle(t, work, ts...)
	set := secrets.New()
	set.Add("JUDGE_KEY", judgeKey)
	ev := &gradeEvents{}
	coord := &shard.Coordinator{
		MSTVersion: "1.0.0", Limits: shard.NewLimiter(map[string]int{"anthropic": 1}, nil), Grades: ev,
		Logger: discardLogger(), Secrets: set, Bundles: []*shard.Bundle{b},
	}
	w := &shard.GradeWorker{Providers: builtin.Providers(), Results: t.TempDir(), MSTVersion: "1.0.0", Logger: discardLogger()}
	res, err := runGradePipes(t.Context(), w, dir, b, coord)
	if err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if res.Done == nil || res.Done.Counts.Planned != 4 {
		t.Errorf("done = %+v, want one planning 4 trials", res.Done)
	}
	if len(ev.bad) > 0 || len(ev.graded) != 4 {
		t.Fatalf("graded %d trials (bad: %v), want 4", len(ev.graded), ev.bad)
	}
	want := map[transcript.Key]struct {
		graded, passed bool
		results        int
	}{
		ts[0].Key: {true, true, 2},
		ts[1].Key: {false, false, 0},
		ts[2].Key: {true, false, 2},
		ts[3].Key: {true, false, 1},
	}
	for k, w := range want {
		g := ev.graded[k]
		if g.Graded != w.graded || g.Passed != w.passed || len(g.Results) != w.results {
			t.Errorf("%s: graded %v passed %v with %d results, want %v %v %d: %+v", k, g.Graded, g.Passed, len(g.Results), w.graded, w.passed, w.results, g)
		}
	}
	if v := ev.graded[ts[0].Key].Results[1].Judge; v == nil || v.Score != 5 || v.Rationale != "matches the forecast" {
		t.Errorf("the Oslo judge's verdict = %+v", v)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d judge requests, want 2 (the errored trial is not judged)", len(reqs))
	}
	for _, r := range reqs {
		if got := r.Header.Get("x-api-key") + r.Header.Get("Authorization"); !strings.Contains(got, judgeKey) {
			t.Errorf("a judge request carries the key %q, want the one the coordinator sent", got)
		}
	}
}

// TestGradeReportsRefused plays a lying grade worker against the
// coordinator: grades of trials its shard does not hold, under a path
// other than the trial's own, without a granted acquire, twice, or a
// trial report from a grade shard, are all refused without a fetch; and a
// collect shard that reports a grade is refused too.
func TestGradeReportsRefused(t *testing.T) {
	synctest.Test(t, testGradeReportsRefused)
}

func testGradeReportsRefused(t *testing.T) {
	k := transcript.Key{Case: "a", Variant: "v", Trial: 1}
	other := transcript.Key{Case: "b", Variant: "v", Trial: 1}
	// One trial per lie about its path, so each lie meets a trial not
	// reported yet.
	lies := append(hostilePaths(t.TempDir()), shard.GradePath(other), "grades/v/a.t1.json/../../x.json", shard.GradeTranscript(k))
	trials := []transcript.Key{k}
	for i := range lies {
		trials = append(trials, transcript.Key{Case: "a", Variant: "v", Trial: i + 2})
	}
	b := &shard.Bundle{Shard: 0, Work: shard.WorkGrade, Grade: &shard.GradeWork{Cases: []shard.GradeCase{{ID: "a"}}, Trials: trials}}
	collect := &shard.Bundle{Shard: 1, Cases: nil}
	var fetched []string
	var mu sync.Mutex
	fetch := func(_ context.Context, p string) ([]byte, error) {
		mu.Lock()
		fetched = append(fetched, p)
		mu.Unlock()
		return json.Marshal(grade.TrialGrade{Key: k, Graded: true, Passed: true})
	}
	ev := &gradeEvents{}
	coord := &shard.Coordinator{MSTVersion: "1.0.0", Limits: shard.NewLimiter(nil, nil), Grades: ev, Logger: discardLogger(), Bundles: []*shard.Bundle{b, collect}}

	w := startServe(t, t.Context(), coord, 0, fetch)
	w.sendMsg(helloFrom("1.0.0", 0))
	w.sendMsg(&protocol.Graded{Acquire: 1, Key: k, Path: shard.GradePath(k)}) // never acquired
	for i, p := range lies {
		id := int64(i + 10)
		w.sendMsg(&protocol.Acquire{ID: id, Key: trials[i+1]})
		synctest.Wait()
		w.sendMsg(&protocol.Graded{Acquire: id, Key: trials[i+1], Path: p})
	}
	if got := len(w.granted()); got != len(lies) {
		t.Fatalf("granted %d acquires, want %d", got, len(lies))
	}
	w.sendMsg(&protocol.Acquire{ID: 1, Key: k})
	synctest.Wait()
	w.sendMsg(&protocol.Trial{Acquire: 1, Key: k, Status: transcript.Answered, Path: shard.GradeTranscript(k)})
	w.sendMsg(&protocol.Graded{Acquire: 1, Key: other, Path: shard.GradePath(other)})
	w.sendMsg(&protocol.Done{CleanupOK: true})
	if _, err := w.wait(); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if len(fetched) != 0 || len(ev.graded) != 0 {
		t.Errorf("fetched %q and handed on %d grades; want nothing from a lying worker", fetched, len(ev.graded))
	}

	// The one honest report, once: fetched and handed on.
	w2 := startServe(t, t.Context(), coord, 0, fetch)
	w2.sendMsg(helloFrom("1.0.0", 0))
	w2.sendMsg(&protocol.Acquire{ID: 7, Key: k})
	synctest.Wait()
	if len(w2.granted()) != 1 {
		t.Fatalf("granted %v, want the one acquire", w2.granted())
	}
	w2.sendMsg(&protocol.Graded{Acquire: 7, Key: k, Path: shard.GradePath(k)})
	w2.sendMsg(&protocol.Graded{Acquire: 7, Key: k, Path: shard.GradePath(k)})
	w2.sendMsg(&protocol.Done{CleanupOK: true})
	if _, err := w2.wait(); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if len(fetched) != 1 || len(ev.graded) != 1 {
		t.Errorf("fetched %q and handed on %d grades; want the one honest grade once", fetched, len(ev.graded))
	}

	// A collect shard reports trials, never grades.
	w3 := startServe(t, t.Context(), coord, 1, fetch)
	w3.sendMsg(helloFrom("1.0.0", 1))
	w3.sendMsg(&protocol.Graded{Acquire: 1, Key: k, Path: shard.GradePath(k)})
	w3.sendMsg(&protocol.Done{CleanupOK: true})
	w3.wait()
	if len(fetched) != 1 {
		t.Errorf("a collect shard's grade report was fetched: %q", fetched)
	}
}
