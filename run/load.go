package run

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

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
	g, err := gather(ctx, st, set, plannedKeys(rec, cases), how, nil, func(error) error { return nil })
	if err != nil {
		return report.Report{}, err
	}
	in.Trials = g.trials
	// The variants' clients and models, as their trials recorded them.
	for _, v := range rec.Variants {
		vi := report.VariantInfo{Name: v}
		if s, ok := g.seen[v]; ok {
			vi.Client, vi.Model = transcript.CanonicalClient(s.Client, nil), s.Model
		}
		in.Variants = append(in.Variants, vi)
	}
	return report.Build(in), nil
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

// plannedKeys are the trials a stored run planned.
func plannedKeys(rec transcript.Run, cases []caseSpec) []transcript.Key {
	var planned []transcript.Key
	for _, c := range cases {
		for _, v := range rec.Variants {
			for i := 1; i <= max(rec.Trials, 1); i++ {
				planned = append(planned, transcript.Key{Case: c.ID, Variant: v, Trial: i})
			}
		}
	}
	return planned
}
