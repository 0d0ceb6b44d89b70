package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
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
	// noGrade is --no-grade: collect only.
	noGrade bool
	// gradeRunner is --grade-runner: grade on that runner once collected.
	gradeRunner string
	// maxErrored is --max-errored as given ("10%", "0.25", "3").
	maxErrored string
	// deadline is --deadline: how long the whole run may take (0: no limit).
	deadline time.Duration
	// runnerSet and maxErroredSet say --runner and --max-errored were
	// given: a resume keeps the run's own runner unless --runner is.
	runnerSet, maxErroredSet bool
	// gates are --min-pass-rate and --baseline (gates.go).
	gates gateFlags
	// store is --store and --store-option: where connector servers'
	// grants are (auth.go).
	store storeFlags
	// detach is --detach and the coordinator's hidden flags (detach.go).
	detach detachFlags
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
and, from MST's own environment, only the key variables the run's clients
read: ` + wrapList(keyVarNames(builtin.Builtin()), ", ") + `, and any variable a
variant names with clientOptions.apiKeyEnv (the file wins when both set one).
Every one of these values is replaced by [redacted:KEY] in everything the run
stores and prints.

Connector servers (servers with oauth) need a grant first: mst auth SERVER -c
EVAL stores one in the credential store (--store, --store-option). The run
mints short-lived access tokens from it and hands the workers those alone;
the grant never leaves this process (docs/connectors.md).

` + exitCodesHelp(),
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
			f.runnerSet = cmd.Flags().Changed("runner")
			f.maxErroredSet = cmd.Flags().Changed("max-errored")
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			return runEval(cmd.Context(), stdio, path, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.results, "results", "", "where runs are kept: a folder, gs://BUCKET/PREFIX or s3://BUCKET/PREFIX (default: the config's results.store, else ./mst-results)")
	fl.StringSliceVar(&f.variants, "variant", nil, "run only these variants (repeat, or separate with commas)")
	fl.StringSliceVar(&f.cases, "case", nil, "run only the cases with these ids (repeat, or separate with commas)")
	fl.IntVar(&f.trials, "trials", 0, "trials per case and variant (default: the config's trials)")
	fl.IntVar(&f.limit, "limit", 0, "run only the first N cases (after --case)")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON on stdout (progress still goes to stderr)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log details on stderr")
	fl.StringVar(&f.secretsFile, "secrets-file", "", "file of KEY=value lines given to clients as environment variables and redacted from everything stored")
	f.store.add(fl, stdio.parts())
	fl.StringVar(&f.runner, "runner", "local", "where trials run: "+strings.Join(stdio.parts().Runners().Names(), ", ")+" (mst runner list)")
	fl.StringArrayVar(&f.runnerOptions, "runner-option", nil, "runner setting as key=value (repeat): shards=N, keep=never|failed|always, and the runner's own")
	fl.StringVar(&f.resume, "resume", "", "continue a stored run (its folder, its URL in a bucket, or its id in --results): run only its missing, cancelled and skipped trials into it, with the runner, runner options, shards and keep it was started with (--runner and --runner-option change them)")
	fl.BoolVar(&f.noGrade, "no-grade", false, "collect the transcripts without grading them (judges need no key then); grade the run later with mst grade")
	fl.StringVar(&f.gradeRunner, "grade-runner", "", "grade on this runner's machines once every trial is collected (with the same --runner-option values), instead of here as trials arrive: judges' keys then go to those machines only, never to a trial's")
	fl.BoolVar(&f.retryErrored, "retry-errored", false, "with --resume, also run again the trials that errored")
	fl.StringVar(&f.maxErrored, "max-errored", defaultMaxErrored, "exit 4 when a variant has more errored or skipped trials than this: a share (10%, 0.1) or a count (3); 100% never fails for errors")
	f.gates.addPassRateFlag(fl)
	f.gates.addBaselineFlag(fl)
	f.detach.add(fl, "run")
	fl.DurationVar(&f.deadline, "deadline", 0, "end the run after this long (90m, 2h), as Ctrl-C would: trials in flight end cancelled, finished ones are kept; 0 means no deadline")
	return cmd
}

// planRequest is the plan request of this build's registries for a runner
// whose machines run goos ("" when unknown); thisMachine says they are
// this machine, so clients' preflight checks (an installed CLI) run too.
func planRequest(parts *builtin.Parts, path string, rdef *runner.Definition, set *secrets.Set, env []string) run.Request {
	clients := parts.Clients()
	return run.Request{
		ConfigFile: path, OS: rdef.OS, ThisMachine: rdef.ThisMachine,
		Clients: clients, Providers: parts.Providers(),
		Graders: parts.Graders(), Sources: parts.Sources(), PluginVersions: parts.PluginVersion,
		Secrets: set, Env: envMap(env),
	}
}

// planError gives a plan's error its exit code: 2 for what the user gave.
func planError(err error) error {
	if errors.Is(err, run.ErrInvalid) {
		return withCode(ExitUsage, err)
	}
	return err
}

func runEval(ctx context.Context, stdio Stdio, path string, f runFlags) (err error) {
	// Everything MST prints from here on, a config error that quotes a
	// line included, passes the redactor.
	set, redact, stdout, stderr, done, err := secretOutput(stdio, f.secretsFile)
	if err != nil {
		return err
	}
	defer done(&err)
	for _, w := range set.Warnings() {
		fmt.Fprintf(stderr, "mst: warning: %s\n", w)
	}
	f.store.secretsFile = f.secretsFile // a shared credential store's key

	limit, err := parseErrorLimit(f.maxErrored)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	gate, err := f.gates.parse()
	if err != nil {
		return err
	}
	if f.deadline < 0 {
		return withCode(ExitUsage, fmt.Errorf("--deadline %s: write a positive duration such as 90m or 2h (0: no deadline)", f.deadline))
	}
	// A resume runs where and how the run was started (its run.json says),
	// unless --runner or --runner-option change it.
	var resumed store.Run
	runnerName, pairs, kept := f.runner, f.runnerOptions, false
	var stored transcript.Run
	if f.resume != "" {
		if resumed, err = openRun(ctx, stdio.parts().ResultStores(), f.resume, f.results, redact); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--resume %w", err))
		}
		if stored, err = resumed.ReadRun(ctx); err != nil {
			return err
		}
		runnerName, pairs, kept = resumeRunner(stored.Runner, f)
	}
	rdef, err := stdio.parts().Runners().Lookup(runnerName)
	if err != nil {
		if kept {
			err = fmt.Errorf("the run was started with runner %s, which this MST does not have (%w): give --runner to resume it elsewhere", runnerName, err)
		}
		return withCode(ExitUsage, fmt.Errorf("--runner: %w", err))
	}
	req := planRequest(stdio.parts(), path, rdef, set, stdio.Env)
	if f.detach.detach {
		if err := refuseDetach(stdio.parts(), rdef, "--runner"); err != nil {
			return err
		}
		// What a detached run needs must be in the secrets file: nothing
		// of this machine's environment goes to the coordinator machine
		// (a key set only there is refused, saying so).
		req.Env, req.NotSent = nil, req.Env
	}
	if err := f.detach.applyTo(&req); err != nil {
		return err
	}
	req.Selection = transcript.Selection{Variants: f.variants, Cases: f.cases, Trials: f.trials, Limit: f.limit}
	req.Results, req.RetryErrored = f.results, f.retryErrored
	req.SecretsFile = f.secretsFile
	req.NoGrade = f.noGrade
	req.Resume = resumed
	plan, err := run.NewPlan(ctx, req)
	if err != nil {
		return planError(err)
	}
	// Gates are checked before anything runs: a gate that cannot be
	// evaluated would otherwise fail only after every trial ran.
	if err := gate.preflight(ctx, stdio.Parts.ResultStores(), plan.Variants); err != nil {
		return err
	}
	// Runner options are recorded in run.json: they are checked once the
	// plan has added to set the key variables its clients read from MST's
	// environment, so that no secret value, from the file or from there,
	// is recorded.
	chosen, err := run.ParseRunnerOptions(rdef, pairs, set)
	if err != nil {
		if kept {
			err = keptError(err, stored.Runner)
		}
		return withCode(ExitUsage, err)
	}
	if kept {
		fmt.Fprintf(stderr, "resuming %s as it was started: %s\n", stored.ID, describeRunner(runnerName, pairs))
	}
	logger := newLogger(stderr, f.verbose)
	// What an MST process of this machine left when it was killed (its
	// bundles, fetched files, work and token folders) goes now.
	runner.SweepFolders(ctx)
	if f.detach.detach {
		return detachRun(ctx, stdio.parts(), stdout, stderr, f, plan, rdef, chosen, pairs, resumed, logger)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	creds, err := connectorStore(ctx, plan, &f.store, logger)
	if err != nil {
		return err
	}
	var gradeOn *run.GradeOn
	if f.gradeRunner != "" {
		if f.noGrade {
			return withCode(ExitUsage, errors.New("--grade-runner grades the run and --no-grade leaves it ungraded: give one of them"))
		}
		if gradeOn, err = newGradeOn(stdio.parts(), f.gradeRunner, "--grade-runner", rdef, chosen, pairs, set, plan.JudgeKeys(), plan.Config.Limits, exe, logger); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	// The deadline ends the run as Ctrl-C would, without a person: the run
	// context ends, trials in flight end cancelled, the rest stays missing.
	deadlineCtx := ctx
	if f.deadline > 0 {
		var cancel context.CancelFunc
		deadlineCtx, cancel = context.WithTimeoutCause(ctx, f.deadline, errDeadline)
		defer cancel()
	}
	var results store.Store = store.Dir{Root: plan.Results}
	if resumed == nil {
		if results, err = resultsStore(ctx, stdio.Parts.ResultStores(), plan.Results, plan.Config.Name); err != nil {
			return err
		}
	}
	var progress run.Progress = run.NewProgressWidth(stderr, isTerminal(stdio.Err), func() int { return termWidth(stdio, stdio.Err) })
	if f.detach.progressFile != "" {
		progress = newFileProgress(progress, f.detach.progressFile, false)
	}
	out, err := run.Execute(deadlineCtx, plan, run.Options{
		Store: results, Clients: req.Clients, Plugins: stdio.Parts.ShardPlugins,
		Runner: rdef, Chosen: chosen, Secrets: set, Redact: redact,
		Progress: progress, Logger: logger,
		MSTVersion: Version, MST: []string{exe}, GradeOn: gradeOn, Credentials: creds,
		MachineDeadline: machineDeadline(f.deadline),
		// Should the process have to end before the run does (a second
		// Ctrl-C), it says how to finish the run.
		Started: func(st store.Run, rec transcript.Run) {
			stdio.Stopping.SetHint(resumeCommand(st.Location(), resumeConfig(rec, plan.Config.File), f))
		},
		CleanupGrace: cleanupGrace,
		OutageLimit:  outageLimit(),
	})
	// hint is the command that finishes the run (resumehint.go).
	hint := func(extra ...string) string {
		return resumeCommand(out.Store.Location(), resumeConfig(out.Run, plan.Config.File), f, extra...)
	}
	if err != nil {
		if out != nil {
			fmt.Fprintf(stderr, "results: %s\n", out.Store.Location())
			if errors.Is(err, run.ErrStoreFull) {
				err = fmt.Errorf("%w\nFree some space there, then finish the run with %s", err, hint())
			} else {
				err = fmt.Errorf("%w\nOnce its cause is fixed, finish the run with %s", err, hint())
			}
		}
		if context.Cause(deadlineCtx) == errDeadline {
			return fmt.Errorf("the run reached its --deadline of %s before it could finish: %w", f.deadline, err)
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
		if err := out.Report.WriteTextWidth(stdout, termWidth(stdio, stdio.Out)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "results: %s\n", out.Store.Location())
	sayKept(stderr, out)
	writeRunHTML(ctx, out, stderr, redact)
	if ctx.Err() != nil {
		return withCode(ExitInterrupted, fmt.Errorf("interrupted: the run is partial; its finished trials are kept in %s; finish it with %s", out.Store.Location(), hint()))
	}
	if context.Cause(deadlineCtx) == errDeadline {
		c := out.Run.Counts
		return withCode(ExitPartial, fmt.Errorf("the run reached its --deadline of %s and is partial (%d missing, %d cancelled of %d trials): finish it with %s", f.deadline, c.Missing, c.Cancelled, c.Planned, hint()))
	}
	if problems := unanswered(out.Report, limit); len(problems) > 0 {
		return withCode(ExitUnanswered, fmt.Errorf("the run cannot answer:\n  %s\nThe errors are listed by cause under the table. Once their cause is fixed, run those trials again with %s",
			strings.Join(problems, "\n  "), hint("--retry-errored")))
	}
	if out.Run.Note != "" && out.Run.Counts.Done() == 0 {
		return errors.New(out.Run.Note)
	}
	if out.GradeError != nil {
		return withCode(ExitPartial, fmt.Errorf("every trial was collected, but grading on the runner %s did not finish: %w", f.gradeRunner, out.GradeError))
	}
	if out.Run.Collect == transcript.CollectPartial {
		c := out.Run.Counts
		return withCode(ExitPartial, fmt.Errorf("the run is partial (%d missing, %d cancelled of %d trials): finish it with %s", c.Missing, c.Cancelled, c.Planned, hint()))
	}
	return runGates(ctx, stdio, stdout, gate, out, f.json)
}

// errDeadline is the cause of a run context ended by --deadline.
var errDeadline = errors.New("the run's --deadline passed")

// keyVarNames lists every key variable a built-in client or provider
// reads, for help texts.
func keyVarNames(parts *builtin.Parts) []string {
	names := provider.KeyVars(parts.Providers())
	clients := parts.Clients()
	for _, n := range clients.Names() {
		d, _ := clients.Lookup(n)
		for _, v := range d.KeyVars {
			if !slices.Contains(names, v) {
				names = append(names, v)
			}
		}
	}
	slices.Sort(names)
	return names
}

// wrapList joins items with sep, breaking lines before 78 columns.
func wrapList(items []string, sep string) string {
	var b strings.Builder
	col := 0
	for i, it := range items {
		if i > 0 {
			b.WriteString(strings.TrimRight(sep, " "))
			if col+len(sep)+len(it) > 72 {
				b.WriteString("\n")
				col = 0
			} else {
				b.WriteString(" ")
				col += len(sep)
			}
		}
		b.WriteString(it)
		col += len(it)
	}
	return b.String()
}

// redactedError shows an error with every secret value replaced, while
// errors.Is and errors.As still see the error it wraps.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// openRun finds a stored run by folder, or by id under the results folder
// (--results, else the default results folder).
func openRun(ctx context.Context, reg *store.Registry, ref, results string, redact *secrets.Redactor) (store.Run, error) {
	if st, done, err := openStoredRun(ctx, reg, ref, results, redact); done {
		return st, err
	}
	if st, err := store.OpenRunDir(ref, redact); err == nil {
		return st, nil
	}
	if results == "" {
		results = eval.DefaultResults
	}
	st, err := store.Dir{Root: results}.Open(ctx, ref, redact)
	if err != nil {
		return nil, runNotFound(ref, results, err)
	}
	return st, nil
}

// secretOutput reads the secrets file (none when path is empty) first, so
// that everything a command prints from then on passes the redactor, and
// returns the set, its redactor and redacting writers over stdio. done
// flushes the writers and redacts *err, the error Main prints; a command
// defers it with its named error.
func secretOutput(stdio Stdio, path string) (set *secrets.Set, redact *secrets.Redactor, stdout, stderr *secrets.Writer, done func(*error), err error) {
	set = secrets.New()
	if path != "" {
		if set, err = secrets.Load(path); err != nil {
			return nil, nil, nil, nil, nil, withCode(ExitUsage, fmt.Errorf("--secrets-file: %w", err))
		}
		// The credential store's key is for the store alone (storeFlags
		// reads it from the file): no client or worker gets it.
		set.Withhold(credstore.KeySecret)
	}
	redact = secrets.NewRedactor(set)
	stdout, stderr = redact.Writer(stdio.Out), redact.Writer(stdio.Err)
	done = func(err *error) {
		stdout.Flush()
		stderr.Flush()
		if *err != nil {
			*err = &redactedError{err: *err, msg: redact.String((*err).Error())}
		}
	}
	return set, redact, stdout, stderr, done, nil
}

// connectorStore opens the credential store when the plan's variants use
// connector servers (nil otherwise), and refuses to start a run whose
// connector servers have no grant there, or a grant for another URL:
// every trial that uses one would error. A grant the authorization
// server no longer honours shows only when the run refreshes it; those
// trials then error and say to run mst auth.
func connectorStore(ctx context.Context, plan *run.Plan, f *storeFlags, logger *slog.Logger) (credstore.Store, error) {
	used := plan.UsedConnectors()
	if len(used) == 0 {
		return nil, nil
	}
	f.results = plan.Results
	st, def, err := f.open(ctx, logger)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, name := range used {
		url := plan.Config.Servers[name].URL
		g, err := st.Get(ctx, name)
		switch {
		case errors.Is(err, credstore.ErrNotFound):
			bad = append(bad, fmt.Sprintf("connector server %s has no grant in %s: authorise it with `mst auth %s -c %s`", name, storeWhere(st, def), name, plan.Config.File))
		case err != nil:
			bad = append(bad, fmt.Sprintf("connector server %s: reading its grant from %s: %v", name, storeWhere(st, def), err))
		case g.Resource != "" && g.Resource != url:
			bad = append(bad, fmt.Sprintf("connector server %s: the grant in %s is for %s, and the config says url %s: authorise this one with `mst auth %s -c %s`", name, storeWhere(st, def), g.Resource, url, name, plan.Config.File))
		}
	}
	if len(bad) > 0 {
		return nil, withCode(ExitUsage, errors.New(strings.Join(bad, "\n")))
	}
	return st, nil
}

// machineDeadline is how long the run's machines may live: its --deadline
// and an hour more, or the runners' default.
func machineDeadline(deadline time.Duration) time.Duration {
	if deadline > 0 {
		return deadline + time.Hour
	}
	return 0
}

// sayKept names the machines keep kept, and how to remove them.
func sayKept(w io.Writer, out *run.Outcome) {
	var kept []string
	for _, m := range out.Run.Runner.Machines {
		if m.Kept {
			kept = append(kept, m.ID)
		}
	}
	if len(kept) == 0 {
		return
	}
	what := "machine"
	if len(kept) > 1 {
		what = "machines"
	}
	fmt.Fprintf(w, "kept %d %s (keep=%s): %s\nremove them with: mst runner cleanup %s\n", len(kept), what, out.Run.Runner.Keep, strings.Join(kept, ", "), shellQuote(out.Store.Location()))
}
