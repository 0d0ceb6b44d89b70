package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/eval"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/run"
)

func newValidateCmd(stdio Stdio) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate EVAL",
		Short: "Check an eval config and its datasets without running anything",
		Long: `Check an eval config against its schema and rules, and load its datasets,
without starting any client or server. The files a stdio server needs on this
machine are checked too: its cwd folder and a command given as a path
(./server). Every problem is listed, each with the file, the path in it and
what to do.`,
		Example: `  mst validate examples/quickstart/eval.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			local, err := builtin.Runners().Lookup("local")
			if err != nil {
				return err
			}
			// The same plan mst run makes, for this machine; no key is read.
			plan, err := run.NewPlan(cmd.Context(), planRequest(args[0], local, nil, nil))
			if err == nil {
				// What a run on this machine would find missing only when it
				// starts a server.
				if errs := eval.CheckFiles(plan.Config); len(errs) > 0 {
					err = withCode(ExitUsage, errs)
				}
			}
			if asJSON {
				res := map[string]any{"file": args[0], "valid": err == nil}
				if err != nil {
					res["errors"] = errorLines(err)
				} else {
					res["cases"] = len(plan.Cases)
					res["variants"] = plan.Variants
					res["trials"] = len(plan.Keys)
				}
				enc := json.NewEncoder(stdio.Out)
				enc.SetIndent("", "  ")
				enc.Encode(res)
				if err != nil {
					return withCode(ExitUsage, fmt.Errorf("%s is not valid", args[0]))
				}
				return nil
			}
			if err != nil {
				return planError(err)
			}
			fmt.Fprintf(stdio.Out, "%s: valid: %d cases × %d variants × %d trials = %d trials\n",
				args[0], len(plan.Cases), len(plan.Variants), plan.Trials, len(plan.Keys))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func errorLines(err error) []string {
	var es eval.Errors
	if e, ok := err.(*exitError); ok {
		err = e.err
	}
	if list, ok := err.(eval.Errors); ok {
		es = list
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Error()
		}
		return out
	}
	return []string{err.Error()}
}

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
