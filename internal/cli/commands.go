package cli

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/eval"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/run"
)

func newSchemaCmd(stdio Stdio) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of eval configs",
		Long: `Print the JSON Schema that eval configs are checked against. Point your editor
at it for completion and inline help, e.g. with the YAML language server:

  # yaml-language-server: $schema=./mst.schema.json`,
		Example: `  mst schema > mst.schema.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := stdio.Out.Write(eval.Schema(run.Catalog{Clients: builtin.Clients(), Providers: builtin.Providers()}))
			return err
		},
	}
}

func newReportCmd(stdio Stdio) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Print the report of a stored run",
		Long: `Print the report of a run from its folder: pass rate per variant with a 95%
interval that allows for trials of one case being alike (Wilson on effective
trials, clustered by case), pass@k and pass^k, trials by outcome, the errored
and skipped trials grouped by cause with their first message, tokens and
latency, the cases side by side, and paired comparisons between variants.
docs/statistics.md says how each number is computed. RUN is the run's folder
(as mst run printed it), or a run id under ./mst-results.`,
		Example: `  mst report mst-results/quickstart-20261130-101500-a1b2c3
  mst report quickstart-20261130-101500-a1b2c3 --json | jq '.variants[] | {variant, passRate}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openRun(cmd.Context(), args[0], "", nil)
			if err != nil {
				return err
			}
			rep, err := run.LoadReport(cmd.Context(), st)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdio.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.WriteText(stdio.Out)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
