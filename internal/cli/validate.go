package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

func newValidateCmd(stdio Stdio) *cobra.Command {
	var asJSON bool
	var secretsFile string
	var variants, cases []string
	cmd := &cobra.Command{
		Use:   "validate EVAL",
		Short: "Check an eval config and its datasets without running anything",
		Long: `Check an eval config against its schema and rules, and load its datasets,
without starting any client or server. The files a stdio server needs on this
machine are checked too: its cwd folder and a command given as a path
(./server). Every problem is listed, each with the file, the path in it and
what to do.

A server's env and headers may refer to a value of the secrets file as
${secret:NAME}: validate checks how each reference is written and, with
--secrets-file, that the file sets every name referred to, and that each
model's API key is set there or in MST's environment, as mst run would.`,
		Example: `  mst validate examples/quickstart/eval.yaml
  mst validate eval.yaml --secrets-file ~/.config/mst/secrets.env
  mst validate eval.yaml --variant clear --secrets-file secrets.env   # only what mst run --variant clear needs`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			local, err := stdio.parts().Runners().Lookup("local")
			if err != nil {
				return err
			}
			// Without a secrets file no value is known: only the way
			// references are written is checked. With one, the names and
			// keys are checked as mst run checks them; the file's values
			// are never printed.
			var set *secrets.Set
			var env []string
			redact := secrets.NewRedactor(secrets.New())
			if secretsFile != "" {
				if set, err = secrets.Load(secretsFile); err != nil {
					return withCode(ExitUsage, fmt.Errorf("--secrets-file: %w", err))
				}
				env = os.Environ()
				redact = secrets.NewRedactor(set)
			}
			// The same plan mst run makes on this machine, which checks the
			// servers' files too (eval.CheckFiles).
			req := planRequest(stdio.parts(), args[0], local, set, env)
			req.SecretsFile = secretsFile
			req.SourceEnv = envMap(stdio.Env)
			// --variant and --case select as mst run's do: only the keys
			// and servers the selected variants use must be there.
			req.Selection = transcript.Selection{Variants: variants, Cases: cases}
			plan, err := run.NewPlan(cmd.Context(), req)
			if asJSON {
				res := validation{envelope: envelope{kindValidate, 1}, File: args[0], Valid: err == nil}
				if err != nil {
					res.Errors = errorLines(err)
					for i := range res.Errors {
						res.Errors[i] = redact.String(res.Errors[i])
					}
				} else {
					res.Cases, res.Variants, res.Trials = ptrInt(len(plan.Cases)), plan.Variants, ptrInt(plan.Size())
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
				return &redactedError{err: planError(err), msg: redact.String(err.Error())}
			}
			fmt.Fprintf(stdio.Out, "%s: valid: %d cases × %d variants × %d trials = %d trials\n",
				args[0], len(plan.Cases), len(plan.Variants), plan.Trials, plan.Size())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().StringSliceVar(&variants, "variant", nil, "check only these variants, as mst run --variant runs them (repeat, or separate with commas)")
	cmd.Flags().StringSliceVar(&cases, "case", nil, "check only these cases, as mst run --case runs them (repeat, or separate with commas)")
	cmd.Flags().StringVar(&secretsFile, "secrets-file", "", "the secrets file a run would use: check that it sets every ${secret:NAME} the servers refer to and every model's key")
	return cmd
}

// errorLines lists a plan's problems one per line.
func errorLines(err error) []string {
	if e, ok := err.(*exitError); ok {
		err = e.err
	}
	var es eval.Errors
	if errors.As(err, &es) {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Error()
		}
		return out
	}
	return []string{err.Error()}
}

// validation is what mst validate --json prints.
type validation struct {
	envelope
	File     string   `json:"file"`
	Valid    bool     `json:"valid"`
	Errors   []string `json:"errors,omitempty"`
	Cases    *int     `json:"cases,omitempty"`
	Variants []string `json:"variants,omitempty"`
	Trials   *int     `json:"trials,omitempty"`
}

func ptrInt(n int) *int { return &n }
