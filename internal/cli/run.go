package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/eval"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/transcript"
)

type runFlags struct {
	results  string
	variants []string
	cases    []string
	trials   int
	limit    int
	json     bool
	verbose  bool
}

func newRunCmd(stdio Stdio) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run EVAL",
		Short: "Run an eval and print its report",
		Long: `Run every case of the eval's datasets under every variant, the configured
number of trials each, then print the report.

Before the first trial, every server must connect and list at least one tool.
Each trial's transcript is written as soon as the trial ends, under
RESULTS/RUN-ID/transcripts/. Ctrl-C stops the run: trials in flight end as
cancelled, everything finished is kept, and run.json says "collect": "partial".

Select a subset without editing the config with --variant, --case, --trials
and --limit.`,
		Example: `  mst run examples/quickstart/eval.yaml
  mst run eval.yaml --variant clear --limit 3 --trials 1
  mst run eval.yaml --case forecast-oslo --case alerts-north-sea --json > report.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEval(cmd.Context(), stdio, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.results, "results", "", "folder that holds runs (default: the config's results, else ./mst-results)")
	fl.StringSliceVar(&f.variants, "variant", nil, "run only these variants (repeat, or separate with commas)")
	fl.StringSliceVar(&f.cases, "case", nil, "run only the cases with these ids (repeat, or separate with commas)")
	fl.IntVar(&f.trials, "trials", 0, "trials per case and variant (default: the config's trials)")
	fl.IntVar(&f.limit, "limit", 0, "run only the first N cases (after --case)")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON on stdout (progress still goes to stderr)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log details on stderr")
	return cmd
}

func loadEval(stdio Stdio, path string) (*eval.Config, []dataset.Case, error) {
	clients := builtin.Clients()
	cfg, err := eval.Load(path, builtin.Catalog{Clients: clients})
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	var paths []string
	for _, d := range cfg.Datasets {
		paths = append(paths, d.Path)
	}
	cases, err := dataset.LoadAll(paths)
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	var bad []error
	for _, c := range cases {
		if _, err := grade.ParseAll(c.Expect); err != nil {
			bad = append(bad, fmt.Errorf("%s: case %q: expect%w", c.Source, c.ID, err))
		}
	}
	if len(bad) > 0 {
		return nil, nil, withCode(ExitUsage, errors.Join(bad...))
	}
	return cfg, cases, nil
}

func runEval(ctx context.Context, stdio Stdio, path string, f runFlags) error {
	cfg, cases, err := loadEval(stdio, path)
	if err != nil {
		return err
	}
	if f.trials < 0 || f.limit < 0 {
		return withCode(ExitUsage, errors.New("--trials and --limit take a positive number"))
	}
	cases, err = dataset.Select(cases, f.cases, f.limit)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	variants := cfg.VariantOrder
	if len(f.variants) > 0 {
		for _, v := range f.variants {
			if _, ok := cfg.Variants[v]; !ok {
				return withCode(ExitUsage, fmt.Errorf("--variant %s: no such variant in %s (it has: %s)", v, path, strings.Join(cfg.VariantOrder, ", ")))
			}
		}
		variants = slices.DeleteFunc(slices.Clone(cfg.VariantOrder), func(v string) bool { return !slices.Contains(f.variants, v) })
	}
	trials := cfg.Trials
	if trials == 0 {
		trials = 1
	}
	if f.trials > 0 {
		trials = f.trials
	}
	results := f.results
	if results == "" {
		results = cfg.Results
	}
	if results == "" {
		results = "mst-results"
	}
	logger := newLogger(stdio.Err, f.verbose)
	clients := builtin.Clients()
	env := envMap(stdio.Env)
	workDir, err := os.MkdirTemp("", "mst-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(workDir)
	local := &runner.Local{Worker: &shard.Worker{
		Clients: clients, Env: env, Environment: run.Environment("local"), Logger: logger,
		MSTVersion: Version, WorkDir: workDir,
	}}
	opts := run.Options{
		Config: cfg, Cases: cases, Variants: variants, Trials: trials,
		Selection: transcript.Selection{Variants: f.variants, Cases: f.cases, Trials: f.trials, Limit: f.limit},
		Results:   results, Clients: clients, Env: env, Logger: logger, MSTVersion: Version,
		Progress: run.NewProgress(stdio.Err, isTerminal(stdio.Err)),
		Runner:   local,
	}
	out, err := run.Execute(ctx, opts)
	if err != nil {
		if out != nil {
			fmt.Fprintf(stdio.Err, "results: %s\n", out.Store.Dir)
		}
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out.Report); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdio.Out)
		if err := out.Report.WriteText(stdio.Out); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdio.Err, "results: %s\n", out.Store.Dir)
	if ctx.Err() != nil {
		return withCode(ExitInterrupted, fmt.Errorf("interrupted: the run is partial; its finished trials are kept in %s", out.Store.Dir))
	}
	if out.Run.Note != "" && out.Run.Counts.Done() == 0 {
		return errors.New(out.Run.Note)
	}
	return nil
}
