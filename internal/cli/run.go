package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/eval"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/store"
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
	// secretsFile is the --secrets-file path, or "".
	secretsFile   string
	runner        string
	runnerOptions []string
	resume        string
	retryErrored  bool
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
and --limit.

Clients get, as environment variables, the KEY=value lines of --secrets-file
and, from MST's own environment, only the provider keys: ANTHROPIC_API_KEY,
OPENAI_API_KEY, CODEX_API_KEY, GEMINI_API_KEY and any variable a variant
names with clientOptions.apiKeyEnv (the file wins when both set one). Every one of these values is replaced by
[redacted:KEY] in everything the run stores and prints.

Exit codes: 0 the run is complete (whatever its pass rate); 1 it could not
run; 2 bad flags or a config that does not validate; 3 the run is partial
(a worker was lost, say): finish it with --resume; 130 interrupted.`,
		Example: `  mst run examples/quickstart/eval.yaml
  mst run eval.yaml --variant clear --limit 3 --trials 1
  mst run eval.yaml --case forecast-oslo --case alerts-north-sea --json > report.json
  mst run eval.yaml --secrets-file ~/.config/mst/secrets.env`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.resume != "" {
				return cobra.RangeArgs(0, 1)(cmd, args)
			}
			if len(args) != 1 {
				return fmt.Errorf("mst run takes the eval config file (or --resume RUN): mst run eval.yaml")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			return runEval(cmd.Context(), stdio, path, f)
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
	fl.StringVar(&f.secretsFile, "secrets-file", "", "file of KEY=value lines given to clients as environment variables and redacted from everything stored")
	fl.StringVar(&f.runner, "runner", "local", "where trials run: local, processes, docker, ssh or gcloud (mst runner list)")
	fl.StringArrayVar(&f.runnerOptions, "runner-option", nil, "runner setting as key=value (repeat): shards=N, keep=never|failed|always, and the runner's own")
	fl.StringVar(&f.resume, "resume", "", "continue a stored run (its folder or id): run only its missing and cancelled trials into it")
	fl.BoolVar(&f.retryErrored, "retry-errored", false, "with --resume, also run again the trials that errored")
	return cmd
}

// loadEval loads and checks an eval for a runner whose machines run goos
// ("" when unknown); thisMachine says they are this machine, so clients'
// preflight checks (an installed CLI) run too.
func loadEval(stdio Stdio, path, goos string, thisMachine bool) (*eval.Config, []dataset.Case, error) {
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
	// goos is the OS of the machines that will run the trials, "" when the
	// runner does not say: then no OS is guessed.
	check := func(name, goos string) error { return builtin.CheckClient(clients, name, goos) }
	if err := run.Check(cfg, cases, clients, goos, thisMachine, check); err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	return cfg, cases, nil
}

func runEval(ctx context.Context, stdio Stdio, path string, f runFlags) (err error) {
	// The secrets file is read first so that everything MST prints from
	// here on, a config error that quotes a line included, passes the
	// redactor; so does the error Main prints.
	set := secrets.New()
	if f.secretsFile != "" {
		if set, err = secrets.Load(f.secretsFile); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--secrets-file: %w", err))
		}
	}
	redact := secrets.NewRedactor(set)
	stdout, stderr := redact.Writer(stdio.Out), redact.Writer(stdio.Err)
	defer func() {
		stdout.Flush()
		stderr.Flush()
		if err != nil {
			err = &redactedError{err: err, msg: redact.String(err.Error())}
		}
	}()
	for _, w := range set.Warnings() {
		fmt.Fprintf(stderr, "mst: warning: %s\n", w)
	}

	runners := builtin.Runners()
	rdef, err := runners.Lookup(f.runner)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("--runner: %w", err))
	}
	chosen, err := runner.ParseOptions(rdef, f.runnerOptions, set)
	if err != nil {
		return withCode(ExitUsage, err)
	}

	var resume *store.Run
	var stored transcript.Run
	if f.resume != "" {
		if len(f.variants) > 0 || len(f.cases) > 0 || f.trials > 0 || f.limit > 0 {
			return withCode(ExitUsage, errors.New("--resume runs the run's own plan: drop --variant, --case, --trials and --limit"))
		}
		if resume, err = openRun(f.resume, f.results); err != nil {
			return withCode(ExitUsage, err)
		}
		if stored, err = resume.ReadRun(); err != nil {
			return err
		}
		if path == "" {
			path = stored.ConfigFile
		}
	} else if f.retryErrored {
		return withCode(ExitUsage, errors.New("--retry-errored goes with --resume RUN"))
	}

	cfg, cases, err := loadEval(stdio, path, rdef.OS, rdef.ThisMachine)
	if err != nil {
		return err
	}
	var variants []string
	var trials int
	if resume != nil {
		// A resumed run keeps its own plan: the cases as they were loaded,
		// its variants and its trials per case.
		if cases, err = resume.ReadCases(); err != nil {
			return fmt.Errorf("reading the run's cases: %w", err)
		}
		variants, trials = stored.Variants, stored.Trials
		for _, v := range variants {
			if _, ok := cfg.Variants[v]; !ok {
				return withCode(ExitUsage, fmt.Errorf("%w: variant %s is gone from %s", run.ErrConfigChanged, v, path))
			}
		}
	} else {
		if variants, trials, cases, err = selectPlan(cfg, cases, f, path); err != nil {
			return err
		}
	}
	results := f.results
	if results == "" {
		results = cfg.Results
	}
	if results == "" {
		results = "mst-results"
	}
	if err := addProviderKeys(set, cfg, cases, variants, envMap(stdio.Env)); err != nil {
		return withCode(ExitUsage, err)
	}
	logger := newLogger(stderr, f.verbose)
	clients := builtin.Clients()
	workDir, err := os.MkdirTemp("", "mst-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(workDir)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	rn, err := rdef.New(ctx, runner.Params{
		Options: chosen.Options, Shards: chosen.Shards, Keep: chosen.Keep, Logger: logger,
		MST: []string{exe}, Secrets: set,
		Worker: &shard.Worker{
			Clients: clients, Environment: run.Environment(rdef.Name), Logger: logger,
			MSTVersion: Version, WorkDir: workDir,
		},
	})
	if err != nil {
		return err
	}
	defer rn.Close()
	opts := run.Options{
		Config: cfg, Cases: cases, Variants: variants, Trials: trials,
		Selection: transcript.Selection{Variants: f.variants, Cases: f.cases, Trials: f.trials, Limit: f.limit},
		Results:   results, Clients: clients, Secrets: set, Redact: redact, Logger: logger, MSTVersion: Version,
		Progress: run.NewProgress(stderr, isTerminal(stdio.Err)),
		Runner:   rn, Shards: chosen.Shards,
		RunnerInfo: transcript.RunnerInfo{Name: rdef.Name, Options: chosen.Options, Shards: chosen.Shards, Keep: chosen.Keep},
		Resume:     resume, RetryErrored: f.retryErrored,
	}
	out, err := run.Execute(ctx, opts)
	if err != nil {
		if out != nil {
			fmt.Fprintf(stderr, "results: %s\n", out.Store.Dir)
		}
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out.Report); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout)
		if err := out.Report.WriteText(stdout); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "results: %s\n", out.Store.Dir)
	if ctx.Err() != nil {
		return withCode(ExitInterrupted, fmt.Errorf("interrupted: the run is partial; its finished trials are kept in %s", out.Store.Dir))
	}
	if out.Run.Note != "" && out.Run.Counts.Done() == 0 {
		return errors.New(out.Run.Note)
	}
	if out.Run.Collect == transcript.CollectPartial {
		c := out.Run.Counts
		return withCode(ExitPartial, fmt.Errorf("the run is partial (%d missing, %d cancelled of %d trials): finish it with mst run --resume %s", c.Missing, c.Cancelled, c.Planned, out.Run.ID))
	}
	return nil
}

// providerKeys are the variables, besides those a variant names with
// clientOptions.apiKeyEnv, that clients may take from MST's environment.
var providerKeys = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY"}

// addProviderKeys adds to set, which clients get as environment variables,
// the provider keys found in env (MST's own environment) that set does not
// hold yet: the secrets file wins. The keys are ANTHROPIC_API_KEY,
// OPENAI_API_KEY and the variables the variants and cases name with
// clientOptions.apiKeyEnv. Like the file's values, they are redacted.
func addProviderKeys(set *secrets.Set, cfg *eval.Config, cases []dataset.Case, variants []string, env map[string]string) error {
	names := slices.Clone(providerKeys)
	keyEnv := func(raw json.RawMessage) {
		var o struct {
			APIKeyEnv string `json:"apiKeyEnv"`
		}
		if len(raw) > 0 && json.Unmarshal(raw, &o) == nil && o.APIKeyEnv != "" && !slices.Contains(names, o.APIKeyEnv) {
			names = append(names, o.APIKeyEnv)
		}
	}
	for _, v := range variants {
		keyEnv(cfg.Variants[v].ClientOptions)
	}
	for _, c := range cases {
		keyEnv(c.ClientOptions)
	}
	for _, name := range names {
		value := env[name]
		if value == "" {
			continue
		}
		if _, inFile := set.Get(name); inFile {
			continue
		}
		if err := set.Add(name, value); err != nil {
			return fmt.Errorf("environment variable %s: %w", name, err)
		}
	}
	return nil
}

// redactedError shows an error with every secret value replaced, while
// errors.Is and errors.As still see the error it wraps.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// selectPlan applies the selection flags: which variants, cases and trials
// per case a new run has.
func selectPlan(cfg *eval.Config, cases []dataset.Case, f runFlags, path string) ([]string, int, []dataset.Case, error) {
	if f.trials < 0 || f.limit < 0 {
		return nil, 0, nil, withCode(ExitUsage, errors.New("--trials and --limit take a positive number"))
	}
	cases, err := dataset.Select(cases, f.cases, f.limit)
	if err != nil {
		return nil, 0, nil, withCode(ExitUsage, err)
	}
	variants := cfg.VariantOrder
	if len(f.variants) > 0 {
		for _, v := range f.variants {
			if _, ok := cfg.Variants[v]; !ok {
				return nil, 0, nil, withCode(ExitUsage, fmt.Errorf("--variant %s: no such variant in %s (it has: %s)", v, path, strings.Join(cfg.VariantOrder, ", ")))
			}
		}
		variants = slices.DeleteFunc(slices.Clone(cfg.VariantOrder), func(v string) bool { return !slices.Contains(f.variants, v) })
	}
	trials := max(cfg.Trials, 1)
	if f.trials > 0 {
		trials = f.trials
	}
	return variants, trials, cases, nil
}

// openRun finds a stored run by folder, or by id under the results folder
// (--results, else ./mst-results).
func openRun(ref, results string) (*store.Run, error) {
	if st, err := store.Open(ref); err == nil {
		return st, nil
	}
	if results == "" {
		results = "mst-results"
	}
	st, err := store.Open(filepath.Join(results, ref))
	if err != nil {
		return nil, fmt.Errorf("--resume %s: no run folder there, nor a run with that id in %s", ref, results)
	}
	return st, nil
}
