package run_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// resumePlan plans the resumption of a stored run through a counting run.
func resumePlan(t *testing.T, path string, cr *countingRun, retry bool) *run.Plan {
	t.Helper()
	req := request(path)
	req.Resume, req.RetryErrored = cr, retry
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(--resume %s, retry errored %v) = %v", cr.Location(), retry, err)
	}
	return p
}

func TestResumeRunsOnlyMissingTrials(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	p, out, _ := newRun(t, path, nil)
	// Lose three transcripts (their grades stay).
	gone := []transcript.Key{{Case: "a", Variant: "w", Trial: 2}, {Case: "c", Variant: "v", Trial: 1}, {Case: "c", Variant: "w", Trial: 1}}
	for _, k := range gone {
		f := filepath.Join(out.Store.Location(), "transcripts", k.Variant, fmt.Sprintf("%s.t%d.json", k.Case, k.Trial))
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	cr := reopen(t, out.Store)
	rp := resumePlan(t, path, cr, false)
	if diff := cmp.Diff(gone, rp.Todo()); diff != "" {
		t.Fatalf("NewPlan(--resume).Todo() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(p.Keys(), rp.Keys()); diff != "" {
		t.Errorf("NewPlan(--resume).Keys differ from the run's plan (-run +resume):\n%s", diff)
	}
	cr.reset()
	res, err := run.Execute(t.Context(), rp, options(nil))
	if err != nil {
		t.Fatalf("Execute(--resume) = %v", err)
	}
	// The lost transcripts still had grades: each is marked superseded
	// before its trial runs again, so the old grade cannot pass for the
	// new transcript's, then graded anew.
	if diff := cmp.Diff(each(gone, 1), cr.counts(replaced)); diff != "" {
		t.Errorf("Execute(--resume): transcripts stored (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(each(gone, 2), cr.counts(appended)); diff != "" {
		t.Errorf("Execute(--resume): grades appended (-want +got):\n%s", diff)
	}
	if res.Run.Resumes != 1 || res.Run.Collect != transcript.CollectComplete || res.Run.ID != out.Run.ID {
		t.Errorf("Execute(--resume) run = %s resumes %d collect %q, want %s resumed once, complete", res.Run.ID, res.Run.Resumes, res.Run.Collect, out.Run.ID)
	}
	if diff := cmp.Diff(out.Run.Counts, res.Run.Counts); diff != "" {
		t.Errorf("Execute(--resume) counts (-first run +resumed):\n%s", diff)
	}
	if diff := cmp.Diff(passes(out.Report), passes(res.Report)); diff != "" {
		t.Errorf("Execute(--resume) pass counts (-first run +resumed):\n%s", diff)
	}

	// Nothing is left: a second resume plans nothing.
	if todo := resumePlan(t, path, reopen(t, out.Store), false).Todo(); len(todo) != 0 {
		t.Errorf("NewPlan(--resume) of a complete run: Todo() = %v, want none", todo)
	}
}

func TestResumeRetryErroredReplaces(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	p, out, _ := newRun(t, path, nil)
	boom := keysOf(p.Keys(), isBoom)
	before := latestGrades(t, out.Store)

	// Without --retry-errored, errored trials are done.
	if todo := resumePlan(t, path, reopen(t, out.Store), false).Todo(); len(todo) != 0 {
		t.Errorf("NewPlan(--resume) of a complete run: Todo() = %v, want none", todo)
	}
	cr := reopen(t, out.Store)
	rp := resumePlan(t, path, cr, true)
	if diff := cmp.Diff(boom, rp.Todo()); diff != "" {
		t.Fatalf("NewPlan(--resume --retry-errored).Todo() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(each(boom, 1), counts(rp.Resume.Replace)); diff != "" {
		t.Errorf("NewPlan(--resume --retry-errored).Resume.Replace (-want +got):\n%s", diff)
	}
	cr.reset()
	res, err := run.Execute(t.Context(), rp, options(nil))
	if err != nil {
		t.Fatalf("Execute(--resume --retry-errored) = %v", err)
	}
	if diff := cmp.Diff(each(boom, 1), cr.counts(replaced)); diff != "" {
		t.Errorf("Execute(--retry-errored): transcripts replaced (-want +got):\n%s", diff)
	}
	if n := cr.counts(written); len(n) != 0 {
		t.Errorf("Execute(--retry-errored): transcripts written %v, want none (only replaced)", n)
	}
	// Each replaced trial gets two: the mark that its old grade no longer
	// holds (appended before the shards start), then its new grade.
	if diff := cmp.Diff(each(boom, 2), cr.counts(appended)); diff != "" {
		t.Errorf("Execute(--retry-errored): grades appended (-want +got):\n%s", diff)
	}
	// The new grade is of the new transcript, and it is the one that counts.
	after := latestGrades(t, out.Store)
	for _, k := range boom {
		tr, err := out.Store.ReadTranscript(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		if !after[k].Trial.Ended.Equal(tr.Timing.Ended) || after[k].Trial.Ended.Equal(before[k].Trial.Ended) {
			t.Errorf("after --retry-errored the grade of %s ended %v, want the new transcript's %v (the old one ended %v)", k, after[k].Trial.Ended, tr.Timing.Ended, before[k].Trial.Ended)
		}
	}
	if diff := cmp.Diff(out.Run.Counts, res.Run.Counts); diff != "" {
		t.Errorf("Execute(--retry-errored) counts (-first +retried):\n%s", diff)
	}
	if res.Report.Counts.Planned != len(p.Keys()) || res.Report.Ignored != 0 {
		t.Errorf("Execute(--retry-errored) report counts %+v ignored %d, want %d planned and nothing ignored", res.Report.Counts, res.Report.Ignored, len(p.Keys()))
	}
	again := reopen(t, out.Store)
	if _, err := run.LoadReport(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if n := again.counts(appended); len(n) != 0 {
		t.Errorf("LoadReport after --retry-errored appended grades %v, want none", n)
	}
}

func TestResumeChangedConfig(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	_, out, _ := newRun(t, path, nil)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("# edited after the run\n")
	f.Close()
	req := request(path)
	req.Resume = reopen(t, out.Store)
	_, err = run.NewPlan(t.Context(), req)
	if !errors.Is(err, run.ErrConfigChanged) || !errors.Is(err, run.ErrInvalid) {
		t.Errorf("NewPlan(--resume, edited config) = %v, want ErrConfigChanged and ErrInvalid", err)
	}
}

func counts(m map[transcript.Key]bool) map[transcript.Key]int {
	out := map[transcript.Key]int{}
	for k, ok := range m {
		if ok {
			out[k] = 1
		}
	}
	return out
}

// A run that dies after a retried trial's transcript was replaced and
// before its grade was stored must not report the old grade for the new
// transcript: the grade marked superseded before the retry makes the
// report grade the trial again.
func TestReportAfterCrashMidRetry(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	p, out, _ := newRun(t, path, nil)
	boom := keysOf(p.Keys(), isBoom)
	k := boom[0]
	st := reopen(t, out.Store)
	old, err := st.ReadTranscript(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if old.Outcome.Status != transcript.Errored {
		t.Fatalf("trial %s = %s, want errored", k, old.Outcome.Status)
	}
	// What Execute does for a retried trial, up to the crash.
	if err := st.AppendGrades(t.Context(), grade.TrialGrade{Key: k, Superseded: true}); err != nil {
		t.Fatal(err)
	}
	retried := *old
	retried.Outcome = transcript.Outcome{Status: transcript.Answered}
	retried.Answer = "echo: hello"
	retried.Timing.Ended = old.Timing.Ended.Add(time.Minute)
	if _, err := st.ReplaceTranscript(t.Context(), &retried); err != nil {
		t.Fatal(err)
	}
	st.reset()
	rep, err := run.LoadReport(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(each([]transcript.Key{k}, 1), st.counts(appended)); diff != "" {
		t.Errorf("LoadReport after a crash mid-retry: grades appended (-want +got):\n%s", diff)
	}
	g := latestGrades(t, st)[k]
	if g.Superseded || g.Trial.Status != transcript.Answered || !g.Trial.Ended.Equal(retried.Timing.Ended) {
		t.Errorf("LoadReport after a crash mid-retry: the grade of %s = %+v, want one of the retried (answered) transcript", k, g)
	}
	if rep.Counts.Errored != out.Run.Counts.Errored-1 || rep.Counts.Answered != out.Run.Counts.Answered+1 {
		t.Errorf("LoadReport after a crash mid-retry: counts %+v, want one errored trial fewer and one answered more than %+v", rep.Counts, out.Run.Counts)
	}
}

// TestResumeDamagedTranscripts: transcripts cut short at any length (a
// crash, a power cut) are missing: the report counts them so and does not
// fail, and --resume runs exactly those trials again.
func TestResumeDamagedTranscripts(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	_, out, _ := newRun(t, path, nil)
	cut := map[transcript.Key]float64{{Case: "a", Variant: "w", Trial: 2}: 0, {Case: "c", Variant: "v", Trial: 1}: 0.5, {Case: "c", Variant: "w", Trial: 1}: 0.9}
	var gone []transcript.Key
	for k, frac := range cut {
		f := filepath.Join(out.Store.Location(), "transcripts", k.Variant, fmt.Sprintf("%s.t%d.json", k.Case, k.Trial))
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b[:int(float64(len(b))*frac)], 0o644); err != nil {
			t.Fatal(err)
		}
		gone = append(gone, k)
	}
	rep, err := run.LoadReport(t.Context(), reopen(t, out.Store))
	if err != nil {
		t.Fatalf("LoadReport with damaged transcripts = %v, want a report", err)
	}
	if rep.Counts.Missing != len(gone) {
		t.Errorf("LoadReport with %d damaged transcripts: %d missing, want %d", len(gone), rep.Counts.Missing, len(gone))
	}
	rp := resumePlan(t, path, reopen(t, out.Store), false)
	if diff := cmp.Diff(each(gone, 1), counts(keySet(rp.Todo()))); diff != "" {
		t.Fatalf("NewPlan(--resume) with damaged transcripts: Todo (-want +got):\n%s", diff)
	}
	res, err := run.Execute(t.Context(), rp, options(nil))
	if err != nil {
		t.Fatalf("Execute(--resume) = %v", err)
	}
	if res.Run.Collect != transcript.CollectComplete || res.Run.Counts.Missing != 0 {
		t.Errorf("Execute(--resume) of damaged transcripts: %s, %d missing; want complete", res.Run.Collect, res.Run.Counts.Missing)
	}
}

func keySet(ks []transcript.Key) map[transcript.Key]bool {
	m := map[transcript.Key]bool{}
	for _, k := range ks {
		m[k] = true
	}
	return m
}

// TestResumeLiveRunRefused: while a process holds a run, --resume of it is
// refused naming that process; once it lets go, the run reads interrupted
// and resumes.
func TestResumeLiveRunRefused(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	_, out, _ := newRun(t, path, nil)
	st := reopen(t, out.Store)
	rec, _ := st.ReadRun(t.Context())
	rec.Collect = transcript.CollectRunning
	if err := st.WriteRun(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	holder := transcript.Owner{PID: 4242, Host: "elsewhere"}
	release, err := st.Lock(t.Context(), holder)
	if err != nil {
		t.Fatal(err)
	}
	req := request(path)
	req.Resume = reopen(t, out.Store)
	_, err = run.NewPlan(t.Context(), req)
	if !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "pid 4242") || !strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("NewPlan(--resume of a live run) = %v, want ErrBusy naming pid 4242 on elsewhere", err)
	}
	// Planned before the owner took it, Execute still refuses.
	release()
	rp := resumePlan(t, path, reopen(t, out.Store), false)
	if rp.Resume.Record.Collect != transcript.CollectInterrupted {
		t.Errorf("a running run whose owner is gone reads %q, want interrupted", rp.Resume.Record.Collect)
	}
	release, err = st.Lock(t.Context(), holder)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Execute(t.Context(), rp, options(nil)); !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "pid 4242") {
		t.Errorf("Execute(--resume) of a run another process holds = %v, want ErrBusy naming it", err)
	}
	release()
	if _, err := run.Execute(t.Context(), rp, options(nil)); err != nil {
		t.Errorf("Execute(--resume) once free = %v", err)
	}
}

// fullStore's runs fail every transcript write after the first n with
// ENOSPC, as a full disk does.
type fullStore struct {
	store.Store
	n int
}

func (s *fullStore) Create(ctx context.Context, id string, redact *secrets.Redactor) (store.Run, error) {
	r, err := s.Store.Create(ctx, id, redact)
	return &fullRun{Run: r, left: s.n}, err
}

type fullRun struct {
	store.Run
	mu   sync.Mutex
	left int
}

func (r *fullRun) WriteTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	r.mu.Lock()
	r.left--
	left := r.left
	r.mu.Unlock()
	if left < 0 {
		return "", &os.PathError{Op: "write", Path: "transcript", Err: syscall.ENOSPC}
	}
	return r.Run.WriteTranscript(ctx, t)
}

// TestFullStoreStopsTheRun: once the store is full the run stops, says
// so, and is partial and resumable; nothing is silently lost.
func TestFullStoreStopsTheRun(t *testing.T) {
	t.Parallel()
	path := writeEval(t, e2eFiles)
	p, err := run.NewPlan(t.Context(), request(path))
	if err != nil {
		t.Fatal(err)
	}
	st := &fullStore{Store: store.Dir{Root: t.TempDir(), Eval: "weather"}, n: 2}
	out, err := run.Execute(t.Context(), p, options(st))
	if !errors.Is(err, run.ErrStoreFull) || !errors.Is(err, syscall.ENOSPC) || out == nil {
		t.Fatalf("Execute into a full store = %v, %v; want ErrStoreFull (ENOSPC) and the run", out, err)
	}
	if out.Run.Collect != transcript.CollectPartial || out.Run.Counts.Missing == 0 || !strings.Contains(out.Run.Note, "full") {
		t.Errorf("run into a full store: collect %q, %d missing, note %q; want partial, missing trials, a note saying full", out.Run.Collect, out.Run.Counts.Missing, out.Run.Note)
	}
	if done := out.Run.Counts.Done() + out.Run.Counts.Missing; done != len(p.Keys()) {
		t.Errorf("counts %+v do not add up to %d trials", out.Run.Counts, len(p.Keys()))
	}
	rp := resumePlan(t, path, reopen(t, out.Store), false)
	if len(rp.Todo()) != out.Run.Counts.Missing+out.Run.Counts.Cancelled {
		t.Errorf("--resume after a full store plans %d trials, want the %d missing and %d cancelled", len(rp.Todo()), out.Run.Counts.Missing, out.Run.Counts.Cancelled)
	}
}
