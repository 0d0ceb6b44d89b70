package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/report"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// LoadReport builds the report of a stored run from its folder alone: its
// run.json, cases, transcripts and grades. A transcript without a stored
// grade is graded again from the cases' expectations and the eval copy's
// graders.
func LoadReport(st *store.Run) (report.Report, error) {
	rec, err := st.ReadRun()
	if err != nil {
		return report.Report{}, err
	}
	cases, err := st.ReadCases()
	if err != nil {
		return report.Report{}, fmt.Errorf("reading the run's cases: %w", err)
	}
	grades := map[transcript.Key]grade.TrialGrade{}
	if b, err := os.ReadFile(filepath.Join(st.Dir, "grades.json")); err == nil {
		var g Grades
		if err := json.Unmarshal(b, &g); err != nil {
			return report.Report{}, fmt.Errorf("%s: %w", filepath.Join(st.Dir, "grades.json"), err)
		}
		for _, tg := range g.Trials {
			grades[tg.Key] = tg
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return report.Report{}, err
	}
	var global []json.RawMessage
	if b, err := os.ReadFile(filepath.Join(st.Dir, "graders.json")); err == nil {
		if err := json.Unmarshal(b, &global); err != nil {
			return report.Report{}, fmt.Errorf("%s: %w", filepath.Join(st.Dir, "graders.json"), err)
		}
	}
	evalGraders, err := grade.ParseAll(global)
	if err != nil {
		return report.Report{}, fmt.Errorf("graders%w", err)
	}
	caseGraders := map[string][]grade.Grader{}
	for _, c := range cases {
		g, err := grade.ParseAll(c.Expect)
		if err != nil {
			return report.Report{}, fmt.Errorf("case %q: expect%w", c.ID, err)
		}
		caseGraders[c.ID] = append(append([]grade.Grader(nil), evalGraders...), g...)
	}
	in := report.Input{Run: rec}
	for _, c := range cases {
		in.Cases = append(in.Cases, c.ID)
	}
	info := map[string]report.VariantInfo{}
	err = st.Transcripts(func(t *transcript.Transcript) error {
		_, r := Summarize(t, caseGraders[t.Case])
		if stored, ok := grades[t.Key]; ok {
			r.Graded, r.Passed = stored.Graded, stored.Passed
		}
		in.Trials = append(in.Trials, r)
		if _, ok := info[t.Variant]; !ok {
			info[t.Variant] = report.VariantInfo{Name: t.Variant, Client: t.Client.Name, Model: t.Model}
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
	sort.Slice(in.Trials, func(i, j int) bool { return keyLess(in.Trials[i].Key, in.Trials[j].Key) })
	return report.Build(in), nil
}
