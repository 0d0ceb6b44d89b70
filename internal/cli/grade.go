package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/detach"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

type gradeFlags struct {
	config, graders, secretsFile, results, resume string
	json, verbose                                 bool
	// runner and runnerOptions are --runner and --runner-option: grade
	// on that runner's machines.
	runner        string
	runnerOptions []string
	// detach is --detach and the coordinator's hidden flags (detach.go).
	detach detachFlags
}

func newGradeCmd(stdio Stdio) *cobra.Command {
	var f gradeFlags
	cmd := &cobra.Command{
		Use:   "grade RUN",
		Short: "Grade a stored run again, into a new grade set",
		Long: `Grade every transcript of a stored run again, with the eval's current graders
(or those of --graders FILE) followed by each case's own expect list as the
run stored it, then print the report from the new grades.

The grades go into a new grade set beside the run's others: a run keeps every
set, and mst report RUN --grades N shows any of them (the newest by default);
mst compare RUN --base-grades N compares the newest with set N, trial by
trial. A run collected with mst run --no-grade gets its first set this way.

Judges get their keys from --secrets-file, or from MST's environment, and
wait for room under the eval's limits.providers. A judge that fails gives an
errored grade, never a failed one. Ctrl-C keeps the grades made so far;
--resume N finishes set N.

With --runner NAME the grading runs as shards on that runner's machines
(--runner-option shards=N and the runner's own options, as for mst run): each
machine gets the transcripts of its cases and the judges' keys, and nothing
else; the grades come back here and are stored as they arrive. A shard that
is lost loses only the grades in flight: --resume N finishes the set.

` + exitCodesHelp(),
		Example: `  mst grade mst-results/quickstart/runs/quickstart-20261130-101500-a1b2c3
  mst grade quickstart-20261130-101500-a1b2c3 --graders judges.yaml --secrets-file ~/.config/mst/secrets.env
  mst grade quickstart-20261130-101500-a1b2c3 --runner docker --runner-option shards=4
  mst report quickstart-20261130-101500-a1b2c3 --grades 1
  mst compare quickstart-20261130-101500-a1b2c3 --base-grades 1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return gradeRun(cmd.Context(), stdio, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "eval config to take the graders and limits from (default: the config the run was made from)")
	fl.StringVar(&f.graders, "graders", "", "grade with the graders of this YAML or JSON `FILE` (a list, or an object with a graders list) in place of the eval's")
	fl.StringVar(&f.secretsFile, "secrets-file", "", "file of KEY=value lines: the judges' keys, redacted from everything stored")
	fl.StringVar(&f.results, "results", "", "folder that holds runs, to find RUN by id (default ./mst-results)")
	fl.StringVar(&f.resume, "resume", "", "finish grade set `N` of the run (one an interrupted mst grade left partial) instead of making a new one")
	fl.StringVar(&f.runner, "runner", "", "grade on this runner's machines (processes, docker, ssh, kubernetes) instead of here")
	fl.StringArrayVar(&f.runnerOptions, "runner-option", nil, "with --runner: runner setting as key=value (repeat): shards=N, keep=never|failed|always, and the runner's own")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log details on stderr")
	f.detach.add(fl, "grading")
	return cmd
}

func gradeRun(ctx context.Context, stdio Stdio, ref string, f gradeFlags) (err error) {
	set, redact, stdout, stderr, done, err := secretOutput(stdio, f.secretsFile)
	if err != nil {
		return err
	}
	defer done(&err)
	if f.detach.detach && f.runner == "" {
		return withCode(ExitUsage, errors.New("--detach: a detached mst grade grades on a runner's machines, and its coordinator machine comes from that runner: give --runner NAME (processes, docker, ssh, …)"))
	}
	st, err := openRun(ctx, stdio.parts().ResultStores(), ref, f.results, redact)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	stdio.Stopping.SetHint(fmt.Sprintf("mst grade %s --resume N, N being the grade set this one began (it stays partial; the graded trials are kept)", shellQuote(absPath(st.Location()))))
	rec, err := st.ReadRun(ctx)
	if err != nil {
		return err
	}
	path := f.config
	if path == "" {
		path = rec.ConfigFile
		if rec.ConfigPath != "" {
			path = rec.ConfigPath
		}
	}
	providers := stdio.parts().Providers()
	var cfg *eval.Config
	if path != "" {
		cfg, err = eval.LoadWith(path, catalog(stdio.parts()),
			eval.LoadOptions{Dir: f.detach.configDir, DatasetsLoaded: f.detach.loadedDatasets != ""})
	}
	if cfg == nil && f.graders == "" {
		if err == nil {
			err = errors.New("the run names no config file")
		}
		return withCode(ExitUsage, fmt.Errorf("the eval config to take the graders from: %w; give it with -c EVAL, or give --graders FILE", err))
	}
	if err != nil {
		fmt.Fprintf(stderr, "mst: warning: %s: %v; grading without its limits.providers\n", path, err)
	}
	var specs []json.RawMessage
	gradersFile := ""
	if f.graders != "" {
		if specs, err = readGradersFile(f.graders, stdio.Parts.Graders()); err != nil {
			return withCode(ExitUsage, err)
		}
		gradersFile = f.graders
	} else {
		specs = cfg.Graders
	}
	// The keys of the judges that grade: the eval's (or --graders'), or,
	// finishing a set, the set's own.
	keySpecs := specs
	if f.resume != "" {
		keySpecs = nil
		if sets, ok := st.(store.GradeSets); ok {
			if list, err := sets.GradeSets(ctx); err == nil {
				for _, gs := range list {
					if gs.ID == f.resume {
						keySpecs = gs.Graders
					}
				}
			}
		}
	}
	env := envMap(stdio.Env)
	if f.detach.detach {
		// A detached grading gets its judges' keys from the secrets file
		// alone: nothing of this machine's environment goes with it.
		env = nil
	}
	keyNames, err := judgeKeys(ctx, st, keySpecs, stdio.Parts.Graders(), providers, set, env, f.secretsFile)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if f.detach.detach {
		return detachGrade(ctx, stdio.parts(), stdout, stderr, f, st, rec.ID, cfg, path, specs, newLogger(stderr, f.verbose))
	}
	if f.runner == "" && len(f.runnerOptions) > 0 {
		return withCode(ExitUsage, errors.New("--runner-option sets up the runner that --runner names: give --runner too, or leave the options out to grade here"))
	}
	var gradeOn *run.GradeOn
	if f.runner != "" {
		var limits eval.Limits
		if cfg != nil {
			limits = cfg.Limits
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		if gradeOn, err = newGradeOn(stdio.parts(), f.runner, "--runner", nil, run.RunnerChoice{}, f.runnerOptions, set, keyNames, limits, exe, newLogger(stderr, f.verbose)); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	// Graders compare in redacted space, as the stored transcripts hold
	// [redacted:NAME] where a secret value was.
	for i, s := range specs {
		specs[i] = redact.Bytes(s)
	}
	limiter := shard.NewLimiter(nil, nil)
	if cfg != nil {
		limiter = shard.NewLimiter(cfg.Limits.Providers, nil)
	}
	judges := &grade.Judges{Providers: providers, Key: set.Get, Acquire: run.JudgeLimits(limiter)}
	progress := run.NewProgress(stderr, isTerminal(stdio.Err))
	var fp *fileProgress
	if f.detach.progressFile != "" {
		fp = newFileProgress(progress, f.detach.progressFile, true)
		progress = fp
	}
	out, err := run.Regrade(ctx, st, run.RegradeOptions{
		Graders: specs, GradersFile: gradersFile, Judges: judges, Resume: f.resume,
		Progress: progress, On: gradeOn, Registry: stdio.Parts.Graders(),
	})
	if fp != nil && out != nil && out.Set.ID != "" {
		fp.set(func(p *detach.Progress) { p.GradeSet = out.Set.ID })
	}
	if err != nil {
		if ctx.Err() != nil {
			return withCode(ExitInterrupted, err)
		}
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out.Report); err != nil {
			return err
		}
	} else if err := out.Report.WriteText(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "grade set %s of %s: %d trials graded\n", out.Set.ID, st.Location(), out.Graded)
	return nil
}

// maxGradersFile bounds a --graders file.
const maxGradersFile = 1 << 20

// readGradersFile reads a YAML or JSON file that holds a list of graders,
// or an object whose graders key does, and checks every grader.
func readGradersFile(path string, graders *grade.Registry) ([]json.RawMessage, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--graders: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxGradersFile+1))
	if err != nil {
		return nil, fmt.Errorf("--graders: %w", err)
	}
	if len(data) > maxGradersFile {
		return nil, fmt.Errorf("--graders %s: the file is larger than 1 MiB; a graders file holds a list of graders", path)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("--graders %s: not YAML or JSON: %v", path, err)
	}
	js = bytes.TrimSpace(js)
	var specs []json.RawMessage
	if len(js) > 0 && js[0] == '{' {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(js, &doc); err != nil {
			return nil, fmt.Errorf("--graders %s: %v", path, err)
		}
		raw, ok := doc["graders"]
		if !ok || len(doc) != 1 {
			return nil, fmt.Errorf("--graders %s: write a list of graders, or an object with one key, graders, that holds the list", path)
		}
		js = raw
	}
	if err := json.Unmarshal(js, &specs); err != nil || len(js) == 0 || js[0] != '[' {
		return nil, fmt.Errorf("--graders %s: write a list of graders, such as [{\"toolCalled\": \"get_forecast\"}], or an object with a graders list", path)
	}
	if _, err := grade.ParseAllIn(graders, specs); err != nil {
		return nil, fmt.Errorf("--graders %s: graders%w", path, err)
	}
	return specs, nil
}

// judgeKeys finds the keys the judges of specs (and of the run's cases)
// read, adds those set only in MST's environment to set (so they are
// redacted), and fails naming any a judge needs that is set nowhere. It
// returns the names of the keys the judges read.
func judgeKeys(ctx context.Context, st store.Run, specs []json.RawMessage, graders *grade.Registry, providers *provider.Registry, set *secrets.Set, env map[string]string, secretsFile string) ([]string, error) {
	gs, err := grade.ParseAllIn(graders, specs)
	if err != nil {
		return nil, err
	}
	cases, err := st.ReadCases(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range cases {
		own, err := grade.ParseAllIn(graders, c.Expect)
		if err != nil {
			return nil, fmt.Errorf("case %q: expect%w", c.ID, err)
		}
		gs = append(gs, own...)
	}
	var errs []error
	var names []string
	for _, in := range grade.Judged(gs) {
		name, required, err := in.KeyVar(providers)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", in.Grader, err))
			continue
		}
		if name == "" {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		if _, ok := set.Get(name); ok {
			continue
		}
		if v := env[name]; v != "" {
			if err := set.Add(name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s: %w", name, err))
			}
			continue
		}
		if required {
			where := "give --secrets-file FILE with a line " + name + "=..., or set it in MST's environment"
			if secretsFile != "" {
				where = fmt.Sprintf("the secrets file %s does not set it, nor does MST's environment: add a line %s=...", secretsFile, name)
			}
			errs = append(errs, fmt.Errorf("%s reads its key from %s: %s", in.Grader, name, where))
		}
	}
	return names, errors.Join(errs...)
}

// newGradeOn sets up grading on the runner name (flag names the flag that
// named it, for errors): with the options of pairs, parsed for it, unless
// it is the run's own runner rdef whose options chosen already holds. The
// grade workers get only the secrets named in keyNames: the judges' keys.
func newGradeOn(parts *builtin.Parts, name, flag string, rdef *runner.Definition, chosen run.RunnerChoice, pairs []string, set *secrets.Set, keyNames []string, limits eval.Limits, exe string, logger *slog.Logger) (*run.GradeOn, error) {
	gdef, err := parts.Runners().Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := run.CheckGradeRunner(gdef, flag); err != nil {
		return nil, err
	}
	if gdef != rdef {
		if chosen, err = run.ParseRunnerOptions(gdef, pairs, set); err != nil {
			if rdef != nil {
				err = fmt.Errorf("%s %s takes the --runner-option values given for --runner %s: %w", flag, name, rdef.Name, err)
			}
			return nil, err
		}
	}
	return &run.GradeOn{
		Runner: gdef, Plugins: parts.ShardPlugins, Chosen: chosen, Secrets: run.OnlyNames(set, keyNames), Limits: limits.Providers,
		MST: []string{exe}, MSTVersion: Version, Logger: logger,
	}, nil
}
