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
	"github.com/mst-eval/mst/report"
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
}

// LoadReport builds the report of a stored run from the store alone: its
// record, cases, graders and grades, from its newest grade set. Only a
// trial that has a transcript and no grade of it is graded (with the
// graders of that set), and its grade is stored, so a second report grades
// nothing. A run the store cannot add grades to (a read-only folder) is
// still reported.
//
// The grade set shown is the newest, unless ctx carries another
// (WithGradeSet).
func LoadReport(ctx context.Context, st store.Run) (report.Report, error) {
	id, _ := ctx.Value(gradeSetKey{}).(string)
	return LoadReportWith(ctx, st, ReportOptions{GradeSet: id})
}

type gradeSetKey struct{}

// WithGradeSet returns ctx carrying the grade set that LoadReport shows
// ("" for the newest), so a command whose report goes through code of its
// own (mst report --grades N) can choose it.
func WithGradeSet(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, gradeSetKey{}, id)
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
	byCase, err := caseGraders(info.Graders, cases, "the run's graders")
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
	rows, ran, err := reportRows(ctx, st, set, rec, cases, how)
	if err != nil {
		return report.Report{}, err
	}
	in.Trials = rows
	// The variants' clients and models, as their trials recorded them.
	for _, v := range rec.Variants {
		vi := report.VariantInfo{Name: v}
		if s, ok := ran[v]; ok {
			vi.Client, vi.Model = transcript.CanonicalClient(s.client, nil), s.model
		}
		in.Variants = append(in.Variants, vi)
	}
	return report.Build(in), nil
}

// ranAs is the client and model a trial recorded.
type ranAs struct{ client, model string }

// The state of a planned trial in reportRows.
const (
	slotStored  uint8 = 1 << iota // a transcript is stored
	slotRow                       // the trial has a row
	slotCurrent                   // its latest grade is current: not superseded, with a summary
)

// reportRows is what LoadReportWith reports of a stored run: the row of
// every planned trial that has a transcript and a grade, from grade log
// set, in the order of keyLess. A trial with a transcript and no current
// grade (a crash between the two, a run from an older MST, a superseded
// grade) is graded now, and its grade appended to set when the store
// takes it. ran is, per variant, what its first trial in plan order that
// names its client ran as.
//
// What it keeps grows with the run by the rows alone, one report.Trial
// each (their keys are made of the run's own case ids and variant names,
// their statuses shared), 4 bytes more per row and 5 per planned trial; a
// key per trial it grades now, and at most a batch of new grades. It
// builds no map or list of the run's keys, and reads one grade at a time
// when set is a store.GradeHistory and st a store.KeyWalker (otherwise
// add what Grades and Keys hold).
func reportRows(ctx context.Context, st store.Run, set store.Grades, rec transcript.Run, cases []caseSpec, how grading) ([]report.Trial, map[string]ranAs, error) {
	plan := newPlanIndex(rec, cases)
	state := make([]uint8, plan.size())
	nStored := 0
	err := eachStoredKey(ctx, st, func(k transcript.Key) error {
		if s, ok := plan.slot(k); ok && state[s]&slotStored == 0 {
			state[s] |= slotStored
			nStored++
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// pos numbers the stored trials in slot order: the place of their
	// rows.
	pos := make([]int32, len(state))
	n := int32(0)
	for s, f := range state {
		if f&slotStored != 0 {
			pos[s], n = n, n+1
		}
	}
	rows := make([]report.Trial, nStored)
	who := make([]int32, nStored) // index+1 in ranAs of the row's client and model, 0: none
	var names []ranAs
	whoIndex := map[ranAs]int32{}
	words := map[string]string{} // one copy of each status and cause
	word := func(w string) string {
		if v, ok := words[w]; ok {
			return v
		}
		if len(words) < 256 {
			words[w] = w
		}
		return w
	}
	put := func(s int, g grade.TrialGrade) {
		t := report.NewTrial(g)
		t.Key = plan.key(s)
		t.Status, t.Cause = word(t.Status), word(t.Cause)
		i := pos[s]
		rows[i] = t
		who[i] = 0
		if c := g.Trial.Client; c != "" {
			r := ranAs{c, g.Trial.Model}
			w, ok := whoIndex[r]
			if !ok {
				names = append(names, r)
				w = int32(len(names))
				whoIndex[r] = w
			}
			who[i] = w
		}
		state[s] |= slotRow
	}
	// legacy are the latest grades that hold no summary of their
	// transcript (older MSTs): regraded, they keep their verdict.
	var legacy map[int]grade.TrialGrade
	each := set.Grades
	if h, ok := set.(store.GradeHistory); ok {
		each = h.GradeHistory // every grade in order: the last of a key wins below
	}
	err = each(ctx, func(g grade.TrialGrade) error {
		s, ok := plan.slot(g.Key)
		if !ok || state[s]&slotStored == 0 {
			return nil
		}
		put(s, g)
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
		return nil, nil, err
	}
	var need []transcript.Key
	for s, f := range state {
		if f&slotStored != 0 && f&slotCurrent == 0 {
			need = append(need, plan.key(s))
		}
	}
	var mu sync.Mutex // guards damaged while the transcripts are read
	var damaged map[transcript.Key]bool
	read := func(k transcript.Key) (*transcript.Transcript, error) {
		t, err := st.ReadTranscript(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			mu.Lock()
			if damaged == nil {
				damaged = map[transcript.Key]bool{}
			}
			damaged[k] = true // cut short: the trial is missing
			mu.Unlock()
			return nil, nil
		}
		return t, err
	}
	// New grades are stored a batch at a time; a store that cannot take
	// them (a read-only folder) still gets its report, only not
	// remembered.
	var batch []grade.TrialGrade
	keep := true
	flush := func() {
		if keep && len(batch) > 0 {
			keep = set.AppendGrades(ctx, batch...) == nil
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
		if ok && state[s]&slotStored != 0 {
			put(s, ng)
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
		return nil, nil, err
	}
	flush()
	shown := func(s int) bool {
		return state[s]&slotRow != 0 && !damaged[plan.key(s)]
	}
	ran := map[string]ranAs{}
	for _, c := range cases {
		for _, v := range rec.Variants {
			if _, ok := ran[v]; ok {
				continue
			}
			for i := 1; i <= plan.k; i++ {
				s, ok := plan.slot(transcript.Key{Case: c.ID, Variant: v, Trial: i})
				if ok && shown(s) && who[pos[s]] != 0 {
					ran[v] = names[who[pos[s]]-1]
					break
				}
			}
		}
	}
	out := rows[:0]
	for s, f := range state {
		if f&slotStored != 0 && shown(s) {
			out = append(out, rows[pos[s]])
		}
	}
	return out, ran, nil
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
func caseGraders(specs []json.RawMessage, cases []caseSpec, what string) (map[string][]grade.Grader, error) {
	global, err := grade.ParseAll(specs)
	if err != nil {
		return nil, fmt.Errorf("%s%w", what, err)
	}
	byCase := make(map[string][]grade.Grader, len(cases))
	for _, c := range cases {
		own, err := grade.ParseAll(c.Expect)
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
