package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// RegradeOptions say how Regrade grades a stored run.
type RegradeOptions struct {
	// Graders are the eval-level graders to grade with (the eval's
	// current graders, or those of a --graders file), as written; each
	// case's expect list, stored with the run, follows them.
	Graders []json.RawMessage
	// GradersFile names the file Graders came from, "" for the eval.
	GradersFile string
	// Judges reach the judges' models; nil when no grader is a judge.
	Judges *grade.Judges
	// Workers bounds the trials graded at once (0: the machine's cores,
	// or 4 at least when a grader is a judge).
	Workers int
	// Resume finishes grade set Resume: only the trials it has no grade
	// of are graded. "" makes a new set.
	Resume string
	// Now returns the current time (tests pin it); nil means time.Now.
	Now func() time.Time
	// Progress, when set, shows the trials as they are graded.
	Progress Progress
	// On, when set, grades on a runner's machines (mst grade --runner)
	// instead of here; Judges is then unused.
	On *GradeOn
	// Registry holds the grader kinds Graders are read with (built in and
	// plugins'); nil means the built-in ones.
	Registry *grade.Registry
}

// remoteFlush is how often grades coming from a runner are stored.
const remoteFlush = 3 * time.Second

// Regraded is what Regrade produced.
type Regraded struct {
	Set    store.GradeSet
	Graded int
	Report report.Report
}

// gradeBatch is how many grades Regrade appends in one write.
const gradeBatch = 512

// Regrade grades every transcript of a stored run again, into a new grade
// set beside the run's others (or into set o.Resume, finishing it), and
// reports the run from that set. The run is locked while it is graded.
// An interrupted regrade keeps the grades it stored; Resume finishes it.
func Regrade(ctx context.Context, st store.Run, o RegradeOptions) (*Regraded, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	sets, ok := st.(store.GradeSets)
	if !ok {
		return nil, fmt.Errorf("the store of run %s keeps one set of grades only, so it cannot be graded again", st.ID())
	}
	release, err := st.Lock(ctx, Self(now()))
	if err != nil {
		return nil, err
	}
	defer release()
	rec, err := st.ReadRun(ctx)
	if err != nil {
		return nil, err
	}
	cases, err := st.ReadCases(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the run's cases: %w", err)
	}
	var set store.GradeSet
	if o.Resume != "" {
		list, err := sets.GradeSets(ctx)
		if err != nil {
			return nil, err
		}
		found := false
		for _, s := range list {
			if s.ID == o.Resume {
				set, found = s, true
			}
		}
		if !found {
			_, err := sets.GradeSet(ctx, o.Resume)
			return nil, fmt.Errorf("--resume: %w", err)
		}
		o.Graders = set.Graders
	}
	what := "the eval's graders"
	if o.GradersFile != "" {
		what = o.GradersFile
	}
	byCase, err := caseGraders(o.Registry, o.Graders, cases, what)
	if err != nil {
		return nil, err
	}
	if o.Resume == "" {
		if set, err = sets.NewGradeSet(ctx, store.GradeSet{Created: now().UTC(), By: "mst grade", GradersFile: o.GradersFile, Graders: o.Graders}); err != nil {
			return nil, err
		}
	}
	log, err := sets.GradeSet(ctx, set.ID)
	if err != nil {
		return nil, err
	}
	done := map[transcript.Key]bool{}
	// The planned trials are told by their place in the plan, and the
	// stored ones met one at a time: todo, a key of the run's own strings
	// per trial to grade, is all that grows with the run (and, resuming,
	// done: the planned trials the set has a current grade of).
	plan := newPlanIndex(rec, cases)
	if o.Resume != "" {
		each := log.Grades
		if h, ok := log.(store.GradeHistory); ok {
			each = h.GradeHistory // every grade in order: the last of a key wins
		}
		err := each(ctx, func(g grade.TrialGrade) error {
			if s, ok := plan.slot(g.Key); ok {
				if k := plan.key(s); !g.Superseded && g.Trial.Status != "" {
					done[k] = true
				} else {
					delete(done, k)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	judged := false
	if plan.size() > 0 {
		for _, c := range cases {
			judged = judged || grade.HasJudge(byCase[c.ID])
		}
	}
	how := grading{graders: func(id string) []grade.Grader { return byCase[id] }, judges: o.Judges, workers: o.Workers}
	var todo []transcript.Key
	err = eachStoredKey(ctx, st, func(k transcript.Key) error {
		if s, ok := plan.slot(k); ok && !done[k] {
			todo = append(todo, plan.key(s))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if o.Progress != nil {
		o.Progress.Start(rec, len(todo))
	}
	if how.workers == 0 && judged {
		how.workers = judgeWorkers(0)
	}
	read := func(k transcript.Key) (*transcript.Transcript, error) {
		t, err := st.ReadTranscript(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil // cut short by a crash: the trial is missing
		}
		return t, err
	}
	var batch []grade.TrialGrade
	graded := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := log.AppendGrades(ctx, batch...)
		batch = batch[:0]
		return err
	}
	lastFlush := time.Now()
	keepGrade := func(g grade.TrialGrade, keep bool) error {
		if !keep || ctx.Err() != nil {
			return nil // an interrupted judge's error is not a grade
		}
		batch = append(batch, g)
		graded++
		if o.Progress != nil {
			o.Progress.Trial(report.NewTrial(g))
		}
		// Grades from a runner come at the pace of its judges: they are
		// stored every few seconds too, so a crash here loses few.
		if len(batch) >= gradeBatch || (o.On != nil && time.Since(lastFlush) > remoteFlush) {
			lastFlush = time.Now()
			return flush()
		}
		return nil
	}
	if o.On != nil {
		var got, sent int
		got, sent, err = o.On.grade(ctx, st, rec, set.ID, o.Graders, gradeCases(cases), todo, func(g grade.TrialGrade) error { return keepGrade(g, true) })
		if err == nil && ctx.Err() == nil && got < sent {
			err = fmt.Errorf("%d of the %d trials sent to the runner %s came back ungraded (its warnings above say why): grade set %s of run %s is partial; finish it with mst grade %s --resume %s --runner %s",
				sent-got, sent, o.On.Runner.Name, set.ID, rec.ID, st.Location(), set.ID, o.On.Runner.Name)
		}
	} else {
		err = gradeAll(ctx, how, todo, read, keepGrade)
	}
	if ferr := flush(); err == nil {
		err = ferr
	}
	if o.Progress != nil {
		o.Progress.Finish()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return &Regraded{Set: set, Graded: graded}, fmt.Errorf("interrupted: grade set %s of run %s is partial (%d trials graded now); finish it with mst grade %s --resume %s", set.ID, rec.ID, graded, st.Location(), set.ID)
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return &Regraded{Set: set, Graded: graded}, fmt.Errorf("interrupted: grade set %s of run %s is partial (%d trials graded now); finish it with mst grade %s --resume %s", set.ID, rec.ID, graded, st.Location(), set.ID)
	}
	rep, err := LoadReportWith(ctx, st, ReportOptions{GradeSet: set.ID, Judges: o.Judges, Graders: o.Registry})
	if err != nil {
		return nil, err
	}
	return &Regraded{Set: set, Graded: graded, Report: rep}, nil
}
