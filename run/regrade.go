package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/report"
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
}

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
	byCase, err := caseGraders(o.Graders, cases, what)
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
	if o.Resume != "" {
		err := log.Grades(ctx, func(g grade.TrialGrade) error {
			done[g.Key] = !g.Superseded && g.Trial.Status != ""
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	want := map[transcript.Key]bool{}
	judged := false
	for _, k := range plannedKeys(rec, cases) {
		want[k] = true
		judged = judged || grade.HasJudge(byCase[k.Case])
	}
	how := grading{graders: func(id string) []grade.Grader { return byCase[id] }, judges: o.Judges, workers: o.Workers}
	stored, err := st.Keys(ctx)
	if err != nil {
		return nil, err
	}
	var todo []transcript.Key
	for _, k := range stored {
		if want[k] && !done[k] {
			todo = append(todo, k)
		}
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
	err = gradeAll(ctx, how, todo, read, func(g grade.TrialGrade, keep bool) error {
		if !keep || ctx.Err() != nil {
			return nil // an interrupted judge's error is not a grade
		}
		batch = append(batch, g)
		graded++
		if o.Progress != nil {
			o.Progress.Trial(report.NewTrial(g))
		}
		if len(batch) >= gradeBatch {
			return flush()
		}
		return nil
	})
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
	rep, err := LoadReportWith(ctx, st, ReportOptions{GradeSet: set.ID, Judges: o.Judges})
	if err != nil {
		return nil, err
	}
	return &Regraded{Set: set, Graded: graded, Report: rep}, nil
}
