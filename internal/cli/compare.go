package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
)

// compareFlags are mst compare's flags.
type compareFlags struct {
	json, markdown bool
	gates          gateFlags
	// baseGrades and grades choose the grade set of BASE and of RUN ("":
	// the newest); with one run, the two sets compared.
	baseGrades, grades string
}

func newCompareCmd(stdio Stdio) *cobra.Command {
	var f compareFlags
	cmd := &cobra.Command{
		Use:   "compare BASE RUN | compare RUN --base-grades N [--grades M]",
		Short: "Compare a run with a base run case by case, or two grade sets of one run",
		Long: `Compare RUN with BASE, two stored runs of the same eval (for example before
and after a change of tool descriptions, or of the server's version). Cases
are paired by id and variants by name; for each variant in both runs it gives
the pass rate in each, the mean difference of the per-case pass fractions
(RUN − BASE) with a 95% bootstrap interval, the exact sign test, and the cases
that changed. Only cases complete in both runs count. --base-grades N and
--grades M choose the grade set each run is read with (default: its newest).

It also says, per server, whether the server's own tool list changed (the
hash MST's proxy recorded of what the server listed) and whether the tools
each variant offered the client changed (after the variant's tool metadata).

Given one run, it compares two of its grade sets instead (mst grade adds a
set each time it regrades a run): --base-grades N is the set compared
against, --grades M the other (default: the newest). The transcripts are the
same, so every difference is the graders': per variant, the pass rate under
each set with the same paired statistics, the trials whose verdict changed
(pass → fail first) with the graders that failed in each set, and each set's
judges with their mean scores. Use it to check a new judge or rubric against
the grades you trusted before.

With --fail-worse it exits 5 when a variant passes significantly less often in
RUN (or under --grades M) (sign test p < 0.05); --min-pass-rate and
--max-errored gate RUN (or set M) as mst report does.

` + exitCodesHelp(),
		Example: `  mst compare mst-results/quickstart/runs/quickstart-20261201-090000-aaaaaa mst-results/quickstart/runs/quickstart-20261201-100000-bbbbbb
  mst compare BASE RUN --markdown --fail-worse
  mst compare BASE RUN --json | jq '.variants[] | {variant, worse}'
  mst grade RUN --graders judges.yaml          # adds grade set 2
  mst compare RUN --base-grades 1              # set 2 against set 1
  mst compare RUN --base-grades 1 --grades 2 --json | jq '.variants[] | {variant, passToFail, failToPass}'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return compareGradesCommand(cmd.Context(), stdio, args[0], f)
			}
			return compareCommand(cmd.Context(), stdio, args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the comparison as JSON (mst schema report describes it)")
	fl.BoolVar(&f.markdown, "markdown", false, "print the comparison as Markdown for a pull-request comment")
	fl.BoolVar(&f.gates.failWorse, "fail-worse", false, "exit 5 when a variant passes significantly less often in RUN than in BASE, or under --grades than under --base-grades (paired sign test, p < 0.05)")
	fl.StringVar(&f.baseGrades, "base-grades", "", "read BASE with its grade set `N`; given one run, the set compared against")
	fl.StringVar(&f.grades, "grades", "", "read RUN with its grade set `M` (default: the newest)")
	f.gates.addPassRateFlag(fl)
	f.gates.addMaxErroredFlag(fl)
	cmd.MarkFlagsMutuallyExclusive("json", "markdown")
	return cmd
}

func compareCommand(ctx context.Context, stdio Stdio, baseRef, runRef string, f compareFlags) error {
	g, err := f.gates.parse()
	if err != nil {
		return err
	}
	bst, err := openRun(ctx, stdio.parts().ResultStores(), baseRef, "", nil)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	rst, err := openRun(ctx, stdio.parts().ResultStores(), runRef, "", nil)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if bst.Location() == rst.Location() && (f.baseGrades != "" || f.grades != "") {
		// One run named twice with grade sets to choose: the sets are
		// what differs, compared trial by trial.
		return compareGradeSets(ctx, stdio, rst, f, g)
	}
	if err := checkGradeSet(ctx, bst, "--base-grades", f.baseGrades); err != nil {
		return err
	}
	if err := checkGradeSet(ctx, rst, "--grades", f.grades); err != nil {
		return err
	}
	base, err := run.LoadReportWith(ctx, bst, run.ReportOptions{GradeSet: f.baseGrades, Graders: stdio.Parts.Graders()})
	if err != nil {
		return err
	}
	rep, err := run.LoadReportWith(ctx, rst, run.ReportOptions{GradeSet: f.grades, Graders: stdio.Parts.Graders()})
	if err != nil {
		return err
	}
	bt, err := runToolHashes(ctx, bst)
	if err != nil {
		return err
	}
	rt, err := runToolHashes(ctx, rst)
	if err != nil {
		return err
	}
	c := report.CompareRuns(base, rep, bt, rt)
	res, err := g.evaluate(ctx, stdio.parts(), rep, nil)
	if err != nil {
		return err
	}
	if g.failWorse {
		res.failed = append(res.failed, worseFailures(c)...)
	}
	return printComparison(stdio, f, g, res, c)
}

// comparison is what mst compare prints: a report.RunComparison or a
// report.GradeSetComparison.
type comparison interface {
	WriteMarkdown(w io.Writer, v report.Verdict) error
	WriteTextWidth(w io.Writer, width int) error
}

// printComparison prints c in the form f asks for, then ends with the
// gates' verdict res.
func printComparison(stdio Stdio, f compareFlags, g gates, res gateResult, c comparison) error {
	var err error
	switch {
	case f.json:
		err = writeIndentedJSON(stdio.Out, c)
	case f.markdown:
		err = c.WriteMarkdown(stdio.Out, g.verdict(res))
	default:
		err = c.WriteTextWidth(stdio.Out, termWidth(stdio, stdio.Out))
	}
	if err != nil {
		return err
	}
	return res.exit()
}
