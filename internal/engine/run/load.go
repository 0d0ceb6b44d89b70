package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// caseSpec is a case as a stored run keeps it.
type caseSpec = dataset.Case

// ReportOptions say how LoadReportWith reports a stored run.
type ReportOptions struct {
	// GradeSet is the grade set to show ("" for the newest).
	GradeSet string
	// Judges reach the judges' models, for trials that still need a
	// grade; nil leaves such trials not graded (shown, not stored).
	Judges *grade.Judges
	// Graders are the grader kinds the run's graders are read with (built
	// in and plugins'); nil means the built-in ones.
	Graders *grade.Registry
}

// LoadReport builds the report of a stored run from the store alone: its
// record, cases, graders and grades, from its newest grade set. Only a
// trial that has a transcript and no grade of it is graded (with the
// graders of that set), and its grade is stored, so a second report grades
// nothing. A run the store cannot add grades to (a read-only folder) is
// still reported.
//
// The grade set shown is the newest, and the graders are read with the
// built-in grader kinds: LoadReportWith chooses.
func LoadReport(ctx context.Context, st store.Run) (report.Report, error) {
	return LoadReportWith(ctx, st, ReportOptions{})
}

// LoadReportWith is LoadReport with a choice of grade set, and the Judges
// that judges need. A run collected with --no-grade and never graded is
// reported with its outcomes and no grade.
func LoadReportWith(ctx context.Context, st store.Run, o ReportOptions) (report.Report, error) {
	rec, err := st.ReadRun(ctx)
	if err != nil {
		return report.Report{}, err
	}
	cases, err := st.ReadCases(ctx)
	if err != nil {
		return report.Report{}, fmt.Errorf("reading the run's cases: %w", err)
	}
	set, info, err := chooseGradeSet(ctx, st, o.GradeSet)
	if err != nil {
		return report.Report{}, err
	}
	byCase, err := caseGraders(o.Graders, info.Graders, cases, "the run's graders")
	if err != nil {
		return report.Report{}, err
	}
	in := report.Input{Run: rec, GradeSet: info.report}
	for _, c := range cases {
		in.Cases = append(in.Cases, c.ID)
	}
	how := grading{
		graders: func(id string) []grade.Grader { return byCase[id] },
		judges:  o.Judges, off: rec.NoGrade && info.report == nil,
		workers: judgeWorkers(0),
	}
	in.NotGraded = how.off
	for _, v := range rec.Variants {
		in.Variants = append(in.Variants, report.VariantInfo{Name: v})
	}
	b := report.NewBuilder(in)
	res, err := reconcile(ctx, st, set, newPlanIndex(rec, cases), cases, how, nil, func(_ int, t report.Trial) { b.Add(t) })
	if err != nil {
		return report.Report{}, err
	}
	// The variants' clients and models, as their trials recorded them.
	for v, s := range res.ran {
		b.Describe(v, transcript.CanonicalClient(s.client, nil), s.model)
	}
	return b.Report(), nil
}

// ranAs is the client and model a trial recorded.
type ranAs struct{ client, model string }

// The state of a planned trial in reconcile.
const (
	slotStored  uint8 = 1 << iota // a transcript is stored
	slotCurrent                   // its latest grade is current: not superseded, with a summary
	slotRow                       // its row was given
	slotDamaged                   // its transcript could not be read back: it is missing
)

// reconciled is what reconcile found besides the rows.
type reconciled struct {
	// ran is, per variant, what its first trial in plan order (cases in
	// the order given, then trial index) that names its client ran as.
	ran map[string]ranAs
	// kept is false when the store did not take the new grades.
	kept bool
}

// reconcile reads a stored run back from its store: it calls row once
// for every trial of the run's plan (rec's variants × cases × trials)
// that has a transcript and a grade in grade log set, with the trial's
// slot in plan and its report record. A trial with a transcript and no
// current grade (a crash between the two, a run from an older MST, a
// superseded grade) is graded now, and its grade appended to set a batch
// at a time; keep says what a store that refuses them means (nil: the
// report is still right, only not remembered; otherwise its error is
// returned).
//
// It keeps 5 bytes per planned trial (a state byte and the place of its
// latest grade in the log), a key per trial it grades now and at most a
// batch of new grades: no map or list of the run's keys and no record per
// trial, so its memory does not grow with the run. It reads the grade log
// twice, one grade at a time when set is a store.GradeHistory, and the
// run's keys one at a time when st is a store.KeyWalker.
func reconcile(ctx context.Context, st store.Run, set store.Grades, plan *planIndex, cases []caseSpec, how grading, keep func(error) error, row func(slot int, t report.Trial)) (reconciled, error) {
	res := reconciled{ran: map[string]ranAs{}, kept: true}
	state := make([]uint8, plan.size())
	err := eachStoredKey(ctx, st, func(k transcript.Key) error {
		if s, ok := plan.slot(k); ok {
			state[s] |= slotStored
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	// The first trial of each variant in plan order that names its client.
	rank := make([]int, len(plan.caseIDs)) // a case's place among cases, by rank
	for i := range rank {
		rank[i] = len(cases)
	}
	for i := len(cases) - 1; i >= 0; i-- {
		if ci, ok := plan.cases[cases[i].ID]; ok {
			rank[ci] = i
		}
	}
	firstRan := map[string]int{}
	give := func(s int, g grade.TrialGrade) {
		state[s] |= slotRow
		t := report.NewTrial(g)
		t.Key = plan.key(s)
		if c := g.Trial.Client; c != "" {
			ci, _ := plan.cases[t.Case]
			at := rank[ci]*plan.k + t.Trial
			if first, ok := firstRan[t.Variant]; !ok || at < first {
				firstRan[t.Variant], res.ran[t.Variant] = at, ranAs{c, g.Trial.Model}
			}
		}
		row(s, t)
	}
	each := set.Grades
	if h, ok := set.(store.GradeHistory); ok {
		each = h.GradeHistory // every grade in order: the last of a key wins
	}
	// First reading: the place of each trial's latest grade, and whether
	// it is current. legacy are the latest grades that hold no summary of
	// their transcript (older MSTs): graded again, they keep their verdict.
	latest := make([]int32, len(state))
	var legacy map[int]grade.TrialGrade
	n := int32(0)
	err = each(ctx, func(g grade.TrialGrade) error {
		n++
		s, ok := plan.slot(g.Key)
		if !ok || state[s]&slotStored == 0 {
			return nil
		}
		latest[s] = n
		state[s] &^= slotCurrent
		if !g.Superseded && g.Trial.Status != "" {
			state[s] |= slotCurrent
		}
		delete(legacy, s)
		if !g.Superseded && g.Trial.Status == "" {
			if legacy == nil {
				legacy = map[int]grade.TrialGrade{}
			}
			legacy[s] = g
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	var need []transcript.Key
	for s, f := range state {
		if f&slotStored != 0 && f&slotCurrent == 0 {
			need = append(need, plan.key(s))
		}
	}
	var mu sync.Mutex // guards state while the transcripts are read
	read := func(k transcript.Key) (*transcript.Transcript, error) {
		t, err := st.ReadTranscript(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			if s, ok := plan.slot(k); ok {
				mu.Lock()
				state[s] |= slotDamaged // cut short: the trial is missing
				mu.Unlock()
			}
			return nil, nil
		}
		return t, err
	}
	var batch []grade.TrialGrade
	var keepErr error
	flush := func() {
		if res.kept && len(batch) > 0 {
			if err := set.AppendGrades(ctx, batch...); err != nil {
				res.kept, keepErr = false, err
			}
		}
		batch = batch[:0]
	}
	err = gradeAll(ctx, how, need, read, func(ng grade.TrialGrade, storable bool) error {
		s, ok := plan.slot(ng.Key)
		if old, was := legacy[s]; ok && storable && was {
			// A grade from before grades held the transcript's summary:
			// keep its verdict, add the summary.
			ng.Graded, ng.Passed, ng.Results = old.Graded, old.Passed, old.Results
		}
		if ok {
			mu.Lock()
			damaged := state[s]&slotDamaged != 0
			mu.Unlock()
			if !damaged {
				give(s, ng)
			}
		}
		if storable {
			batch = append(batch, ng)
			if len(batch) >= gradeBatch {
				flush()
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	flush()
	if keepErr != nil && keep != nil {
		if err := keep(keepErr); err != nil {
			return res, err
		}
	}
	// Second reading: the rows of the trials whose latest grade stands.
	n = 0
	return res, each(ctx, func(g grade.TrialGrade) error {
		n++
		s, ok := plan.slot(g.Key)
		if !ok || latest[s] != n || state[s]&(slotRow|slotDamaged) != 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		give(s, g)
		return nil
	})
}

// eachStoredKey calls fn with the key of every transcript of st, one at a
// time when st is a store.KeyWalker.
func eachStoredKey(ctx context.Context, st store.Run, fn func(transcript.Key) error) error {
	if w, ok := st.(store.KeyWalker); ok {
		return w.EachKey(ctx, fn)
	}
	keys, err := st.Keys(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}

// chosenSet is a grade set and what a report says of it (nil report:
// the run has no set yet).
type chosenSet struct {
	Graders []json.RawMessage
	report  *report.GradeSetInfo
}

// chooseGradeSet opens grade set id of st ("" for the newest). A run with
// no set yet gives its own (empty) grades and the graders it was run with.
func chooseGradeSet(ctx context.Context, st store.Run, id string) (store.Grades, chosenSet, error) {
	sets, ok := st.(store.GradeSets)
	if !ok {
		if id != "" && id != "1" {
			_, err := gradeSetOf(ctx, st, id)
			return nil, chosenSet{}, err
		}
		specs, err := st.ReadGraders(ctx)
		if err != nil {
			return nil, chosenSet{}, fmt.Errorf("reading the run's graders: %w", err)
		}
		return st, chosenSet{Graders: specs, report: &report.GradeSetInfo{ID: "1", Sets: 1}}, nil
	}
	list, err := sets.GradeSets(ctx)
	if err != nil {
		return nil, chosenSet{}, err
	}
	if len(list) == 0 {
		if id != "" {
			_, err := sets.GradeSet(ctx, id)
			return nil, chosenSet{}, err
		}
		specs, err := st.ReadGraders(ctx)
		if err != nil {
			return nil, chosenSet{}, fmt.Errorf("reading the run's graders: %w", err)
		}
		return st, chosenSet{Graders: specs}, nil
	}
	pick := list[len(list)-1]
	if id != "" {
		i := slices.IndexFunc(list, func(s store.GradeSet) bool { return s.ID == id })
		if i < 0 {
			_, err := sets.GradeSet(ctx, id)
			return nil, chosenSet{}, err
		}
		pick = list[i]
	}
	g, err := sets.GradeSet(ctx, pick.ID)
	if err != nil {
		return nil, chosenSet{}, err
	}
	return g, chosenSet{Graders: pick.Graders, report: &report.GradeSetInfo{
		ID: pick.ID, Sets: len(list), By: pick.By, Created: pick.Created, GradersFile: pick.GradersFile,
	}}, nil
}

// caseGraders parses the eval-level specs and each case's expect list:
// the graders of every case.
func caseGraders(reg *grade.Registry, specs []json.RawMessage, cases []caseSpec, what string) (map[string][]grade.Grader, error) {
	global, err := grade.ParseAllIn(reg, specs)
	if err != nil {
		return nil, fmt.Errorf("%s%w", what, err)
	}
	byCase := make(map[string][]grade.Grader, len(cases))
	for _, c := range cases {
		own, err := grade.ParseAllIn(reg, c.Expect)
		if err != nil {
			return nil, fmt.Errorf("case %q: expect%w", c.ID, err)
		}
		byCase[c.ID] = append(slices.Clip(global), own...)
	}
	return byCase, nil
}

// planIndex numbers the trials a stored run planned (its cases × its
// variants × trials from 1), so that what is kept per trial is a place in
// a table rather than an entry of a map keyed by strings. Slots are in
// the order of keyLess: variant name, case id, trial. The key of a slot is
// made of the run's own strings, shared by every trial.
type planIndex struct {
	cases, variants map[string]int // id -> rank among the sorted ids
	caseIDs, names  []string       // by rank
	k               int
}

func newPlanIndex(rec transcript.Run, cases []caseSpec) *planIndex {
	p := &planIndex{cases: map[string]int{}, variants: map[string]int{}, k: max(rec.Trials, 1)}
	for _, c := range cases {
		if _, ok := p.cases[c.ID]; !ok {
			p.cases[c.ID] = 0
			p.caseIDs = append(p.caseIDs, c.ID)
		}
	}
	for _, v := range rec.Variants {
		if _, ok := p.variants[v]; !ok {
			p.variants[v] = 0
			p.names = append(p.names, v)
		}
	}
	slices.Sort(p.caseIDs)
	slices.Sort(p.names)
	for i, id := range p.caseIDs {
		p.cases[id] = i
	}
	for i, v := range p.names {
		p.variants[v] = i
	}
	return p
}

// size is the number of planned trials.
func (p *planIndex) size() int { return len(p.caseIDs) * len(p.names) * p.k }

// slot is the place of k, if the run planned it.
func (p *planIndex) slot(k transcript.Key) (int, bool) {
	ci, okC := p.cases[k.Case]
	vi, okV := p.variants[k.Variant]
	if !okC || !okV || k.Trial < 1 || k.Trial > p.k {
		return 0, false
	}
	return (vi*len(p.caseIDs)+ci)*p.k + k.Trial - 1, true
}

// key is the trial at slot s.
func (p *planIndex) key(s int) transcript.Key {
	t, s := s%p.k, s/p.k
	return transcript.Key{Case: p.caseIDs[s%len(p.caseIDs)], Variant: p.names[s/len(p.caseIDs)], Trial: t + 1}
}
