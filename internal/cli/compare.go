package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/report"
)

// compareFlags are mst compare's flags.
type compareFlags struct {
	json, markdown bool
	gates          gateFlags
}

func newCompareCmd(stdio Stdio) *cobra.Command {
	var f compareFlags
	cmd := &cobra.Command{
		Use:   "compare BASE RUN",
		Short: "Compare a run with a base run of the same eval, case by case",
		Long: `Compare RUN with BASE, two stored runs of the same eval (for example before
and after a change of tool descriptions, or of the server's version). Cases
are paired by id and variants by name; for each variant in both runs it gives
the pass rate in each, the mean difference of the per-case pass fractions
(RUN − BASE) with a 95% bootstrap interval, the exact sign test, and the cases
that changed. Only cases complete in both runs count.

It also says, per server, whether the server's own tool list changed (the
hash MST's proxy recorded of what the server listed) and whether the tools
each variant offered the client changed (after the variant's tool metadata).

With --fail-worse it exits 5 when a variant passes significantly less often in
RUN (sign test p < 0.05); --min-pass-rate and --max-errored gate RUN as mst
report does.

` + exitCodesHelp(),
		Example: `  mst compare mst-results/quickstart/runs/quickstart-20261201-090000-aaaaaa mst-results/quickstart/runs/quickstart-20261201-100000-bbbbbb
  mst compare BASE RUN --markdown --fail-worse
  mst compare BASE RUN --json | jq '.variants[] | {variant, worse}'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return compareCommand(cmd.Context(), stdio, args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the comparison as JSON (mst schema report describes it)")
	fl.BoolVar(&f.markdown, "markdown", false, "print the comparison as Markdown for a pull-request comment")
	fl.BoolVar(&f.gates.failWorse, "fail-worse", false, "exit 5 when a variant passes significantly less often in RUN than in BASE (paired sign test, p < 0.05)")
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
	bst, base, err := loadRun(ctx, baseRef)
	if err != nil {
		return err
	}
	rst, rep, err := loadRun(ctx, runRef)
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
	res, err := g.evaluate(ctx, rep, nil)
	if err != nil {
		return err
	}
	if g.failWorse {
		res.failed = append(res.failed, worseFailures(c)...)
	}
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
