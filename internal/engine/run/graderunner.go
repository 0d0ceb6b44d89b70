package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// GradeOn says where a run is graded when it is not graded here: as grade
// shards on a runner's machines (mst run --grade-runner, mst grade
// --runner), each a `mst grade-shard` worker that runs the graders and
// judges over the transcripts it is sent and sends the grades back. The
// coordinator keeps the grades; the judges' keys go to the grade workers
// alone, never to a collect worker.
type GradeOn struct {
	Runner *runner.Definition
	// Plugins are this process's plugin versions: each grade bundle lists
	// those of its graders' plugins, which its workers must have.
	Plugins shard.PluginVersions
	Chosen  RunnerChoice
	// Secrets are the judges' keys: all a grade worker is sent.
	Secrets *secrets.Set
	// Limits caps the trials graded at once per provider of their judges
	// (limits.providers), across every grade shard.
	Limits map[string]int
	// Concurrency is how many trials each grade worker grades at once (0:
	// 4, or the machine's cores when no grader is a judge).
	Concurrency int
	MST         []string
	MSTVersion  string
	Logger      *slog.Logger
	// Heartbeat, Silence and StopGrace are as in Options.
	Heartbeat, Silence, StopGrace time.Duration
}

// CheckGradeRunner refuses a runner whose workers cannot grade: the local
// runner's worker runs inside mst, where grading already happens without
// a runner.
func CheckGradeRunner(def *runner.Definition, flag string) error {
	if def.Name == "local" {
		return fmt.Errorf("%s local: grading without a runner already runs on this machine; leave out %s, or name a runner whose machines grade (processes, docker, ssh, kubernetes)", flag, flag)
	}
	return nil
}

// gradeEvents checks the grades grade shards send back and hands each on.
type gradeEvents struct {
	// facts are what the coordinator read of each transcript it sent: a
	// grade's summary is taken from here, never from the worker.
	facts  map[transcript.Key]grade.Summary
	logger *slog.Logger
	mu     sync.Mutex
	emit   func(grade.TrialGrade) error
	err    error
	stop   context.CancelCauseFunc
	graded int
}

func (e *gradeEvents) Graded(shardIndex int, m *protocol.Graded, data []byte) {
	tg, err := e.check(m, data)
	if err != nil {
		e.logger.Warn("refused a grade from a grade worker; the trial stays ungraded", "shard", shardIndex, "trial", m.Key.String(), "err", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	if err := e.emit(tg); err != nil {
		e.err = err
		e.stop(err)
		return
	}
	e.graded++
}

// check decodes a worker's grade. The verdicts are the worker's (it ran
// the graders); what the transcript says is the coordinator's own: a
// grade of another trial, or one whose verdict its trial's outcome rules
// out (a pass of an errored trial), is refused.
func (e *gradeEvents) check(m *protocol.Graded, data []byte) (grade.TrialGrade, error) {
	var tg grade.TrialGrade
	if data == nil {
		return tg, errors.New("the runner brought no grade file back")
	}
	if err := json.Unmarshal(data, &tg); err != nil {
		return tg, fmt.Errorf("the grade file is not a grade: %w", err)
	}
	if tg.Key != m.Key {
		return tg, fmt.Errorf("the worker reported %s and sent the grade of %s", m.Key, tg.Key)
	}
	facts, ok := e.facts[m.Key]
	if !ok {
		return tg, errors.New("no transcript of it was sent to be graded")
	}
	if tg.Superseded {
		return tg, errors.New("a grade worker cannot mark a grade superseded")
	}
	tg.Trial = facts
	switch facts.Status {
	case transcript.Answered:
	case transcript.NoAnswer, transcript.TimedOut:
		if tg.Passed {
			return tg, fmt.Errorf("it passes a trial that ended %s", facts.Status)
		}
	default:
		if tg.Graded || tg.Passed {
			return tg, fmt.Errorf("it grades a trial that ended %s, which is never graded", facts.Status)
		}
	}
	if tg.Passed && !tg.Graded {
		return tg, errors.New("it passes a trial it did not grade")
	}
	if tg.Passed && tg.Errored != "" {
		return tg, errors.New("it passes a trial whose grading errored")
	}
	// A result fails the trial as grade.TrialContext, which the worker
	// ran, says: an advisory judge's low score (gate: false) does not.
	for _, r := range tg.Results {
		switch {
		case !tg.Passed:
		case r.FailsTrial():
			return tg, fmt.Errorf("it passes the trial although grader %s failed it", r.Grader)
		case !r.Advisory && r.Error != "":
			return tg, fmt.Errorf("it passes the trial although grader %s, which decides it, gave no verdict", r.Grader)
		}
	}
	return tg, nil
}

// grade grades the trials keys of the run st on the runner: it splits them
// into shards by case (CaseShards), sends each shard its transcripts
// and graders, and hands every grade that comes back, checked, to emit
// (from one goroutine at a time). A trial whose grade does not come back
// (its shard was lost, the run was interrupted) stays ungraded: graded
// says how many of the sent trials (those with a transcript) came back.
// The error says why no shard could grade at all, or why emit failed.
func (g *GradeOn) grade(ctx context.Context, st store.Run, rec transcript.Run, set string, specs []json.RawMessage, cases []shard.GradeCase, keys []transcript.Key, emit func(grade.TrialGrade) error) (graded, sent int, err error) {
	if len(keys) == 0 {
		return 0, 0, nil
	}
	logger := g.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rn, err := g.Runner.New(ctx, runner.Params{
		Options: g.Chosen.Options, Shards: g.Chosen.Shards, Keep: g.Chosen.Keep, Logger: logger,
		MST: g.MST, MSTVersion: g.MSTVersion, Secrets: g.Secrets, StopGrace: g.StopGrace, Heartbeat: g.Heartbeat,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("the grade runner %s: %w", g.Runner.Name, err)
	}
	defer rn.Close()
	staging, err := runner.TempFolder("mst-grade-", rec.ID)
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(staging)
	byShard, facts, err := g.bundles(ctx, st, rec, set, specs, cases, keys, staging)
	if err != nil {
		return 0, 0, err
	}
	sent = len(facts)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	events := &gradeEvents{facts: facts, logger: logger, emit: emit, stop: stop}
	coord := &shard.Coordinator{
		MSTVersion: g.MSTVersion, Limits: shard.NewLimiter(g.Limits, nil), Grades: events,
		Logger: logger, Secrets: g.Secrets, Silence: g.Silence, Bundles: byShard,
	}
	errs := make([]error, len(byShard))
	var wg sync.WaitGroup
	for i, b := range byShard {
		dir := filepath.Join(staging, fmt.Sprint(b.Shard))
		wg.Go(func() {
			_, err := rn.RunShard(ctx, runner.Shard{
				Index: b.Shard, Run: rec.ID, Attempt: rec.Resumes + 1, Work: shard.WorkGrade, BundleDir: dir,
				Serve: func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
					_, serr := coord.Serve(ctx, b.Shard, in, out, shard.Fetch(fetch))
					return serr
				},
			})
			if err != nil {
				logger.Warn("grade shard ended badly", "shard", b.Shard, "err", err)
				errs[i] = fmt.Errorf("grade shard %d: %w", b.Shard, err)
			}
		})
	}
	wg.Wait()
	events.mu.Lock()
	defer events.mu.Unlock()
	if events.err != nil {
		return events.graded, sent, events.err
	}
	if events.graded == 0 && ctx.Err() == nil {
		if err := errors.Join(errs...); err != nil {
			return 0, sent, fmt.Errorf("no trial was graded on the runner %s:\n%w", g.Runner.Name, err)
		}
	}
	return events.graded, sent, nil
}

// bundles writes one grade bundle per shard into staging, each with the
// transcripts of its trials, and returns the bundles and the summary of
// every transcript sent. Trials without a transcript are left out.
func (g *GradeOn) bundles(ctx context.Context, st store.Run, rec transcript.Run, set string, specs []json.RawMessage, cases []shard.GradeCase, keys []transcript.Key, staging string) ([]*shard.Bundle, map[transcript.Key]grade.Summary, error) {
	n := max(g.Chosen.Shards, 1)
	ofCase := make(map[string]shard.GradeCase, len(cases))
	for _, c := range cases {
		ofCase[c.ID] = c
	}
	work := make([]*shard.GradeWork, n)
	facts := make(map[transcript.Key]grade.Summary, len(keys))
	where := CaseShards(keys, n) // balanced, as trials are (split.go)
	for _, k := range keys {
		i := where[k.Case]
		t, err := st.ReadTranscript(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			continue // cut short by a crash: the trial is missing
		}
		if err != nil {
			return nil, nil, err
		}
		data, err := json.Marshal(t)
		if err != nil {
			return nil, nil, err
		}
		path := filepath.Join(staging, fmt.Sprint(i), filepath.FromSlash(shard.GradeTranscript(k)))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, nil, fmt.Errorf("writing a grade shard's transcript: %w", err)
		}
		facts[k] = transcript.Summarize(t)
		w := work[i]
		if w == nil {
			w = &shard.GradeWork{Set: set, Graders: specs, Concurrency: g.Concurrency}
			work[i] = w
		}
		if !slices.ContainsFunc(w.Cases, func(c shard.GradeCase) bool { return c.ID == k.Case }) {
			c, ok := ofCase[k.Case]
			if !ok {
				c = shard.GradeCase{ID: k.Case}
			}
			w.Cases = append(w.Cases, c)
		}
		w.Trials = append(w.Trials, k)
	}
	var out []*shard.Bundle
	plugins := g.Plugins.For(graderNamespaces(specs, cases))
	for i, w := range work {
		if w == nil {
			continue
		}
		b := &shard.Bundle{Run: rec, Shard: i, Work: shard.WorkGrade, Grade: w, Plugins: plugins}
		if err := shard.WriteBundle(filepath.Join(staging, fmt.Sprint(i)), b); err != nil {
			return nil, nil, fmt.Errorf("writing the bundle of grade shard %d: %w", i, err)
		}
		out = append(out, b)
	}
	return out, facts, nil
}

// gradeCases turns a run's cases into what grade shards need of them:
// their ids and expect lists.
func gradeCases(cases []caseSpec) []shard.GradeCase {
	out := make([]shard.GradeCase, len(cases))
	for i, c := range cases {
		out[i] = shard.GradeCase{ID: c.ID, Expect: c.Expect}
	}
	return out
}

// gradeCollected grades, on o.GradeOn's runner, every planned trial of the
// run whose stored transcript has no grade of it yet, into the run's own
// grades (set 1), storing them as they come back.
func gradeCollected(ctx context.Context, st store.Run, p *Plan, o Options, rec transcript.Run) error {
	current := map[transcript.Key]bool{}
	err := st.Grades(ctx, func(g grade.TrialGrade) error {
		current[g.Key] = !g.Superseded && g.Trial.Status != ""
		return nil
	})
	if err != nil {
		return err
	}
	want := make(map[transcript.Key]bool, p.Size())
	for k := range p.AllKeys() {
		want[k] = true
	}
	stored, err := st.Keys(ctx)
	if err != nil {
		return err
	}
	var todo []transcript.Key
	for _, k := range stored {
		if want[k] && !current[k] {
			todo = append(todo, k)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// The graders compare in redacted space, as the stored transcripts do.
	redact := func(specs []json.RawMessage) []json.RawMessage {
		if o.Redact == nil {
			return specs
		}
		out := make([]json.RawMessage, len(specs))
		for i, s := range specs {
			out[i] = o.Redact.Bytes(s)
		}
		return out
	}
	cases := make([]shard.GradeCase, len(p.Cases))
	for i, c := range p.Cases {
		cases[i] = shard.GradeCase{ID: c.ID, Expect: redact(c.Expect)}
	}
	if gp, ok := o.Progress.(gradingProgress); ok {
		gp.StartGrading(o.GradeOn.Runner.Name, len(todo))
		defer o.Progress.Finish()
	}
	var batch []grade.TrialGrade
	last := time.Now()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := st.AppendGrades(ctx, batch...)
		batch, last = batch[:0], time.Now()
		return err
	}
	got, sent, err := o.GradeOn.grade(ctx, st, rec, "1", redact(p.Config.Graders), cases, todo, func(g grade.TrialGrade) error {
		batch = append(batch, g)
		if o.Progress != nil {
			o.Progress.Trial(report.NewTrial(g))
		}
		if len(batch) >= gradeBatch || time.Since(last) > remoteFlush {
			return flush()
		}
		return nil
	})
	if ferr := flush(); err == nil {
		err = ferr
	}
	if err == nil && got < sent && ctx.Err() == nil {
		err = fmt.Errorf("%d of the %d trials sent came back ungraded (the warnings say why); grade them with mst grade %s --resume 1 --runner %s", sent-got, sent, st.Location(), o.GradeOn.Runner.Name)
	}
	return err
}

// OnlyNames returns the values of set named in names, in a set of their
// own: what grade workers are sent (the judges' keys, nothing else).
func OnlyNames(set *secrets.Set, names []string) *secrets.Set {
	out := secrets.New()
	if set == nil {
		return out
	}
	for _, n := range names {
		if v, ok := set.Get(n); ok {
			out.Add(n, v)
		}
	}
	return out
}

// JudgeKeys names the variables the plan's judges read their keys from.
func (p *Plan) JudgeKeys() []string { return slices.Clone(p.judgeKeys) }

// graderNamespaces lists the namespaces of the plugin graders that specs
// and the cases' expect lists name ({"acme/grader/x": …}).
func graderNamespaces(specs []json.RawMessage, cases []shard.GradeCase) []string {
	var out []string
	add := func(list []json.RawMessage) {
		for _, s := range list {
			var m map[string]json.RawMessage
			if json.Unmarshal(s, &m) != nil {
				continue
			}
			for k := range m {
				if ns, _, ok := strings.Cut(k, "/"); ok && !slices.Contains(out, ns) {
					out = append(out, ns)
				}
			}
		}
	}
	add(specs)
	for _, c := range cases {
		add(c.Expect)
	}
	slices.Sort(out)
	return out
}
