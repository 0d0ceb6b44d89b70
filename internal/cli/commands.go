package cli

import (
	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/report"
)

func newSchemaCmd(stdio Stdio) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of eval configs (mst schema report: of reports)",
		Long: `Print the JSON Schema that eval configs are checked against. Point your editor
at it for completion and inline help, e.g. with the YAML language server:

  # yaml-language-server: $schema=./mst.schema.json

mst schema report prints the schema of the JSON that mst report, mst run and
mst compare print with --json.`,
		Example: `  mst schema > mst.schema.json
  mst schema report > mst-report.schema.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := stdio.Out.Write(eval.Schema(catalog(stdio.parts())))
			return err
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "report",
		Short: "Print the JSON Schema of mst report --json and mst compare --json",
		Long: `Print the JSON Schema of the reports MST prints as JSON: kind mst.report
(mst report --json, mst run --json) and kind mst.compare (mst compare
--json). Each document starts with its kind and version; docs/reports.md says
what a new version may change.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := stdio.Out.Write(report.Schema())
			return err
		},
	})
	return cmd
}

func newReportCmd(stdio Stdio) *cobra.Command {
	var rf reportFlags
	var gradeSet string
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Print the report of a stored run",
		Long: `Print the report of a run from its folder: pass rate per variant with a 95%
interval that allows for trials of one case being alike (Wilson on effective
trials, clustered by case), pass@k and pass^k, trials by outcome, the errored
and skipped trials grouped by cause with their first message, tokens and
latency, the cases side by side, and paired comparisons between variants.
docs/statistics.md says how each number is computed. RUN is the run's folder
(as mst run printed it), or a run id under ./mst-results. Given an eval's
runs instead (a folder RESULTS/EVAL/runs/, or a bucket's PREFIX/EVAL/runs/),
it lists them, newest first.

--markdown prints a short summary for a pull-request comment, --junit FILE
writes a JUnit XML file for CI (one test case per case and variant), and
--failures lists the failed trials with their graders' reasons. The gates
(--min-pass-rate, --max-errored, --baseline) make the command exit non-zero;
docs/reports.md describes every format.

` + exitCodesHelp(),
		Example: `  mst report mst-results/quickstart/runs/quickstart-20261130-101500-a1b2c3
  mst report quickstart-20261130-101500-a1b2c3 --json | jq '.variants[] | {variant, passRate}'
  mst report RUN --markdown --min-pass-rate 0.8 --junit junit.xml
  mst report RUN --baseline BASE-RUN`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if listed, err := listRunsIfListing(cmd.Context(), stdio, args[0], rf.json); listed {
				return err
			}
			return reportCommand(cmd.Context(), stdio, args[0], rf, gradeSet)
		},
	}
	rf.add(cmd)
	cmd.Flags().StringVar(&gradeSet, "grades", "", "show grade set `N` of the run (mst grade adds sets; default: the newest)")
	addHTMLFlag(cmd, stdio)
	return cmd
}
