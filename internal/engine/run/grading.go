package run

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// grading is how a run or a report grades what has no grade yet: the
// graders of each case, the Judges judges reach their models through, and
// whether grading is off (a run collected with --no-grade).
type grading struct {
	graders func(caseID string) []grade.Grader
	judges  *grade.Judges
	off     bool
	// workers bounds the trials graded at once when judges are among the
	// graders (they wait on a model); deterministic graders need no more
	// than the machine's cores.
	workers int
}

// notJudged is the Errored of a grade made without the Judges that the
// case's judges need; such a grade is shown, never stored.
const notJudged = "not graded yet: this case's judges need a model; grade the run with mst grade"

// grade grades t, or says it is not graded.
func (g grading) grade(ctx context.Context, t *transcript.Transcript) (tg grade.TrialGrade, store bool) {
	if g.off {
		return grade.TrialGrade{Key: t.Key, Trial: transcript.Summarize(t)}, false
	}
	gs := g.graders(t.Case)
	if g.judges == nil && grade.HasJudge(gs) {
		switch t.Outcome.Status {
		case transcript.Answered:
			return grade.TrialGrade{Key: t.Key, Trial: transcript.Summarize(t), Errored: notJudged}, false
		}
	}
	return grade.TrialContext(ctx, t, gs, g.judges), true
}

// resolveJudges finds the judges among the plan's graders, takes their
// keys from MST's environment into the secrets where the file does not set
// them (so they are redacted too), and fails the plan when a judge's key
// is set nowhere. A run collected with --no-grade needs no judge key.
func (p *Plan) resolveJudges(req Request, noGrade bool) error {
	seen := map[string]bool{}
	var infos []grade.JudgeInfo
	for _, c := range p.Cases {
		for _, in := range grade.Judged(p.graders[c.ID]) {
			if !seen[in.Hash] {
				seen[in.Hash] = true
				infos = append(infos, in)
			}
		}
	}
	if len(infos) == 0 || req.Providers == nil {
		return nil
	}
	p.judges = &grade.Judges{Providers: req.Providers}
	if req.Secrets != nil {
		p.judges.Key = req.Secrets.Get
	}
	var errs []error
	for _, in := range infos {
		name, required, err := in.KeyVar(req.Providers)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", p.Config.File, in.Grader, err))
			continue
		}
		if name == "" {
			continue
		}
		if !slices.Contains(p.judgeKeys, name) {
			p.judgeKeys = append(p.judgeKeys, name)
		}
		if req.Secrets == nil {
			continue
		}
		if _, ok := req.Secrets.Get(name); ok {
			continue
		}
		if v := req.Env[name]; v != "" {
			if err := req.Secrets.Add(name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s: %w", name, err))
			}
			continue
		}
		if required && !noGrade && req.NotSent[name] != "" {
			errs = append(errs, fmt.Errorf("%s: %s reads its key from %s: %s", p.Config.File, in.Grader, name, notSent(name, req.SecretsFile)))
			continue
		}
		if required && !noGrade {
			where := "neither MST's environment nor a --secrets-file sets it"
			if req.SecretsFile != "" {
				where = fmt.Sprintf("neither MST's environment nor the secrets file %s sets it", req.SecretsFile)
			}
			errs = append(errs, fmt.Errorf("%s: %s reads its key from %s, but %s: add %s=... to the secrets file, or collect without grading (--no-grade) and grade later with mst grade", p.Config.File, in.Grader, name, where, name))
		}
	}
	return errors.Join(errs...)
}

// workerSecrets is what the coordinator hands collect workers: every
// secret except the keys only judges read. Judges run where the run is
// graded, never in a collect worker, so their keys stay here.
func (p *Plan) workerSecrets(set *secrets.Set) *secrets.Set {
	// Judges' keys and dataset sources' credentials are used on this
	// machine only, unless a client or a server needs the same variable.
	unneeded := append(slices.Clone(p.judgeKeys), p.sourceCreds...)
	if set == nil || len(unneeded) == 0 {
		return set
	}
	keep := map[string]bool{}
	for _, k := range p.KeyVars {
		keep[k] = true
	}
	for _, st := range p.Settings {
		for _, srv := range st.Servers {
			refs, _ := srv.SecretRefs()
			for _, r := range refs {
				keep[r.Name] = true
			}
		}
	}
	drop := false
	for _, k := range unneeded {
		drop = drop || !keep[k]
	}
	if !drop {
		return set
	}
	out := secrets.New()
	for _, name := range set.Names() {
		if slices.Contains(unneeded, name) && !keep[name] {
			continue
		}
		v, _ := set.Get(name)
		out.Add(name, v)
	}
	return out
}

// JudgeLimits makes judges wait for room under limits.providers, the
// caps trials obey: Acquire for Judges.
func JudgeLimits(l *shard.Limiter) func(ctx context.Context, provider string) (func(), error) {
	return func(ctx context.Context, p string) (func(), error) { return l.AcquireProvider(ctx, p) }
}

// gradeAll reads the transcripts of keys (read returns nil for one to
// leave out) and grades them with workers goroutines, reading included,
// and hands each grade to emit from one goroutine at a time. Memory holds
// at most about 2×workers transcripts whatever their number.
func gradeAll(ctx context.Context, g grading, keys []transcript.Key, read func(transcript.Key) (*transcript.Transcript, error), emit func(tg grade.TrialGrade, store bool) error) error {
	workers := g.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type done struct {
		tg    grade.TrialGrade
		store bool
	}
	in := make(chan transcript.Key, workers)
	out := make(chan done, workers)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range in {
				t, err := read(k)
				if err != nil {
					cancel(err)
					return
				}
				if t == nil {
					continue
				}
				tg, st := g.grade(ctx, t)
				select {
				case out <- done{tg, st}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	emitted := make(chan error, 1)
	go func() {
		var err error
		for d := range out {
			if err == nil {
				if err = emit(d.tg, d.store); err != nil {
					cancel(err)
				}
			}
		}
		emitted <- err
	}()
feed:
	for _, k := range keys {
		select {
		case in <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(in)
	wg.Wait()
	close(out)
	if err := <-emitted; err != nil {
		return err
	}
	return context.Cause(ctx)
}

// GradeSet returns the grade log of set id of a stored run ("" or "1"
// for the run's own grades), for callers that read grades the way a
// report of that set shows them.
func GradeSet(ctx context.Context, st store.Run, id string) (store.Grades, error) {
	return gradeSetOf(ctx, st, id)
}

// gradeSetOf returns the grade log of set id of st ("" for set 1, the
// run's own grades).
func gradeSetOf(ctx context.Context, st store.Run, id string) (store.Grades, error) {
	if id == "" || id == "1" {
		if sets, ok := st.(store.GradeSets); ok && id == "1" {
			return sets.GradeSet(ctx, id)
		}
		return st, nil
	}
	sets, ok := st.(store.GradeSets)
	if !ok {
		return nil, fmt.Errorf("grade set %s: %w: the store of run %s keeps only set 1", id, store.ErrNotFound, st.ID())
	}
	return sets.GradeSet(ctx, id)
}

// grading is how the plan's run grades: with the plan's graders and
// judges, or not at all (--no-grade).
func (p *Plan) grading(o Options) grading {
	return grading{graders: p.Graders, judges: p.judges, off: p.NoGrade, workers: judgeWorkers(p.Config.Limits.Concurrency)}
}

// judgeWorkers is how many trials are judged at once: the eval's
// concurrency, at least 4.
func judgeWorkers(concurrency int) int { return max(concurrency, 4) }

// firstSetInfo is what a report of set 1 says of it, as LoadReport would
// say it.
func firstSetInfo(ctx context.Context, st store.Run) *report.GradeSetInfo {
	if g, ok := st.(*fullGuard); ok {
		st = g.Run
	}
	info := &report.GradeSetInfo{ID: "1", Sets: 1}
	sets, ok := st.(store.GradeSets)
	if !ok {
		return info
	}
	list, err := sets.GradeSets(ctx)
	if err != nil || len(list) == 0 {
		return info
	}
	info.Sets, info.By, info.Created, info.GradersFile = len(list), list[0].By, list[0].Created, list[0].GradersFile
	return info
}
