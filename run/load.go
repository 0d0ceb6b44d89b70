package run

import (
	"context"
	"fmt"
	"slices"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/report"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// LoadReport builds the report of a stored run from the store alone: its
// record, cases, graders and grades. Only a trial that has a transcript and
// no grade of it is graded (with the graders stored with the run), and its
// grade is stored, so a second report grades nothing. A run the store cannot
// add grades to (a read-only folder) is still reported.
func LoadReport(ctx context.Context, st store.Run) (report.Report, error) {
	rec, err := st.ReadRun(ctx)
	if err != nil {
		return report.Report{}, err
	}
	cases, err := st.ReadCases(ctx)
	if err != nil {
		return report.Report{}, fmt.Errorf("reading the run's cases: %w", err)
	}
	specs, err := st.ReadGraders(ctx)
	if err != nil {
		return report.Report{}, fmt.Errorf("reading the run's graders: %w", err)
	}
	global, err := grade.ParseAll(specs)
	if err != nil {
		return report.Report{}, fmt.Errorf("the run's graders%w", err)
	}
	byCase := make(map[string][]grade.Grader, len(cases))
	in := report.Input{Run: rec}
	for _, c := range cases {
		own, err := grade.ParseAll(c.Expect)
		if err != nil {
			return report.Report{}, fmt.Errorf("case %q: expect%w", c.ID, err)
		}
		byCase[c.ID] = append(slices.Clip(global), own...)
		in.Cases = append(in.Cases, c.ID)
	}
	var planned []transcript.Key
	for _, c := range cases {
		for _, v := range rec.Variants {
			for i := 1; i <= max(rec.Trials, 1); i++ {
				planned = append(planned, transcript.Key{Case: c.ID, Variant: v, Trial: i})
			}
		}
	}
	g, err := gather(ctx, st, planned, func(id string) []grade.Grader { return byCase[id] }, nil, func(error) error { return nil })
	if err != nil {
		return report.Report{}, err
	}
	in.Trials = g.trials
	// The variants' clients and models, as their trials recorded them.
	info := map[string]report.VariantInfo{}
	err = st.Grades(ctx, func(tg grade.TrialGrade) error {
		if _, ok := info[tg.Variant]; !ok && tg.Trial.Client != "" {
			info[tg.Variant] = report.VariantInfo{Name: tg.Variant, Client: transcript.CanonicalClient(tg.Trial.Client, nil), Model: tg.Trial.Model}
		}
		return nil
	})
	if err != nil {
		return report.Report{}, err
	}
	for _, v := range rec.Variants {
		vi, ok := info[v]
		if !ok {
			vi = report.VariantInfo{Name: v}
		}
		in.Variants = append(in.Variants, vi)
	}
	return report.Build(in), nil
}
