package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// compareGradesCommand is mst compare RUN: two grade sets of one run.
func compareGradesCommand(ctx context.Context, stdio Stdio, ref string, f compareFlags) error {
	g, err := f.gates.parse()
	if err != nil {
		return err
	}
	st, err := openRun(ctx, stdio.parts().ResultStores(), ref, "", nil)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	return compareGradeSets(ctx, stdio, st, f, g)
}

// compareGradeSets compares grade set --grades (default: the newest) of
// st with set --base-grades, and applies the gates to the first.
func compareGradeSets(ctx context.Context, stdio Stdio, st store.Run, f compareFlags, g gates) error {
	ids, err := gradeSetIDs(ctx, st)
	if err != nil {
		return err
	}
	name := transcript.Printable(st.ID())
	if len(ids) < 2 {
		have := "no grade set yet"
		if len(ids) == 1 {
			have = "only grade set " + ids[0]
		}
		return withCode(ExitUsage, fmt.Errorf("comparing grade sets: run %s has %s; mst grade %s adds one (with --graders FILE to grade with other graders), or give a second run to compare with: mst compare BASE RUN", name, have, name))
	}
	if f.baseGrades == "" {
		return withCode(ExitUsage, fmt.Errorf("given one run, mst compare compares two of its grade sets: give --base-grades N, the set to compare against (run %s has sets %s)", name, strings.Join(ids, ", ")))
	}
	if err := checkGradeSet(ctx, st, "--base-grades", f.baseGrades); err != nil {
		return err
	}
	if err := checkGradeSet(ctx, st, "--grades", f.grades); err != nil {
		return err
	}
	other := f.grades
	if other == "" {
		other = ids[len(ids)-1]
	}
	if other == f.baseGrades {
		return withCode(ExitUsage, fmt.Errorf("--base-grades %s: that is the set compared with it too; give --grades M, another of run %s's sets (%s)", f.baseGrades, name, strings.Join(ids, ", ")))
	}
	base, err := run.LoadReportWith(ctx, st, run.ReportOptions{GradeSet: f.baseGrades, Graders: stdio.Parts.Graders()})
	if err != nil {
		return err
	}
	rep, err := run.LoadReportWith(ctx, st, run.ReportOptions{GradeSet: other, Graders: stdio.Parts.Graders()})
	if err != nil {
		return err
	}
	baseGrades, err := runGrades(ctx, st, base)
	if err != nil {
		return err
	}
	grades, err := runGrades(ctx, st, rep)
	if err != nil {
		return err
	}
	c := report.CompareGradeSets(base, rep, baseGrades, grades)
	res, err := g.evaluate(ctx, stdio.parts(), rep, nil)
	if err != nil {
		return err
	}
	if g.failWorse {
		for _, v := range c.Variants {
			if v.Worse {
				res.failed = append(res.failed, worseLine(v.Variant, "under grade set "+c.Grades.ID+" than under set "+c.Base.ID, v.Paired))
			}
		}
	}
	return printComparison(stdio, f, g, res, c)
}

// worseLine says that variant passes less often (than: "than in base run
// X"), with the paired comparison that says so.
func worseLine(variant, than string, p report.Comparison) string {
	return fmt.Sprintf("variant %s passes less often %s: mean difference %+.2f [95%% CI %+.2f … %+.2f] over %d paired cases, sign test p=%.3f",
		transcript.Printable(variant), than, *p.MeanDifference, p.Interval.Low, p.Interval.High, p.Cases, *p.SignTestP)
}

// gradeSetIDs lists the grade sets of st, oldest first. A store that
// keeps no sets has set 1 alone.
func gradeSetIDs(ctx context.Context, st store.Run) ([]string, error) {
	sets, ok := st.(store.GradeSets)
	if !ok {
		return []string{"1"}, nil
	}
	list, err := sets.GradeSets(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids, nil
}

// checkGradeSet fails with ExitUsage, naming flag and the sets there are,
// when id ("" for the newest) is not a grade set of st.
func checkGradeSet(ctx context.Context, st store.Run, flag, id string) error {
	if id == "" {
		return nil
	}
	ids, err := gradeSetIDs(ctx, st)
	if err != nil {
		return err
	}
	if slices.Contains(ids, id) {
		return nil
	}
	name := transcript.Printable(st.ID())
	if len(ids) == 0 {
		return withCode(ExitUsage, fmt.Errorf("%s %s: run %s has no grade set yet; mst grade %s makes set 1", flag, transcript.Printable(id), name, name))
	}
	return withCode(ExitUsage, fmt.Errorf("%s %s: run %s has no grade set %s; its sets are %s", flag, transcript.Printable(id), name, transcript.Printable(id), strings.Join(ids, ", ")))
}
