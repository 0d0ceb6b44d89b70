package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/builtin/credstore/bucketcreds"
	"github.com/mst-eval/mst/internal/engine/detach"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// detachFlags are the flags of a detached run (mst run --detach, mst
// grade --detach), and the hidden ones the coordinator gives the commands
// it runs.
type detachFlags struct {
	detach bool
	// deadline is --coordinator-deadline: how long the coordinator
	// machine may live.
	deadline time.Duration
	// heartbeat and logEvery set the coordinator's rhythm (hidden, for
	// tests).
	heartbeat, logEvery time.Duration

	// The coordinator's own: the datasets as the launching machine loaded
	// them, the config's folder and path there, and where to report
	// progress.
	loadedDatasets, configDir, configOrigin, progressFile string
}

func (f *detachFlags) add(fl *pflag.FlagSet, what string) {
	fl.BoolVar(&f.detach, "detach", false, "run the coordinator on a machine the runner creates (the runner's coordinator machine) and return at once, printing the detached run's id; follow it with mst runs watch ID. Needs a result store in a bucket (--results gs://… or s3://…); the secrets file's values go to that machine, nothing of this machine's environment does (docs/detached.md)")
	fl.DurationVar(&f.deadline, "coordinator-deadline", 0, "with --detach: how long the coordinator machine may live before the runner removes it, whatever it is doing (default 24h, or the --deadline plus an hour)")
	fl.DurationVar(&f.heartbeat, "detach-heartbeat", 0, "with --detach: how often the coordinator rewrites its status (default 30s)")
	fl.DurationVar(&f.logEvery, "detach-log-every", 0, "with --detach: how often the coordinator uploads its log (default 1m)")
	fl.StringVar(&f.loadedDatasets, "loaded-datasets", "", "the "+what+"'s datasets as loaded on the launching machine (datasets.json of a detached run)")
	fl.StringVar(&f.configDir, "config-dir", "", "the folder the config's relative paths start from (a detached run's launching machine's)")
	fl.StringVar(&f.configOrigin, "config-origin", "", "the config file's path to record in run.json (on the launching machine)")
	fl.StringVar(&f.progressFile, "progress-file", "", "rewrite this file with the "+what+"'s progress as JSON (a detached run's coordinator reads it)")
	for _, n := range []string{"detach-heartbeat", "detach-log-every", "loaded-datasets", "config-dir", "config-origin", "progress-file"} {
		fl.MarkHidden(n)
	}
}

// detachLaunch is what the launching machine resolved for a detached run.
type detachLaunch struct {
	spec *detach.Spec
	rdef *runner.Definition
	// options are the runner's own options, for its coordinator machine.
	options map[string]string
	// configFile is the eval config to ship; datasets the datasets as
	// loaded here, for datasets.json; graders the --graders file's
	// graders (mst grade).
	configFile string
	datasets   []dataset.Loaded
	graders    []json.RawMessage
	// secretsFile is the --secrets-file path ("" for none), whose content
	// goes on mst coordinate's stdin; secretNames its names.
	secretsFile string
	secretNames []string
	hostPaths   runner.HostPaths
	records     *detach.Records
	flags       detachFlags
	// runDeadline is mst run's --deadline.
	runDeadline time.Duration
	json        bool
	logger      *slog.Logger
}

// refuseDetach checks, before any machine, what a detached run needs of
// its runner.
func refuseDetach(parts *builtin.Parts, rdef *runner.Definition, flag string) error {
	if rdef.Coordinator != nil {
		return nil
	}
	var can []string
	reg := parts.Runners()
	for _, n := range reg.Names() {
		if d, _ := reg.Lookup(n); d.Coordinator != nil {
			can = append(can, n)
		}
	}
	return withCode(ExitUsage, fmt.Errorf("--detach: the runner %s cannot make a coordinator machine, so its runs cannot be detached; give %s one of %s", rdef.Name, flag, strings.Join(can, ", ")))
}

// detachedRecords opens the result store at loc for a detached run's
// records: a bucket, never a folder on this machine.
func detachedRecords(ctx context.Context, reg *store.Registry, loc, evalName string) (*detach.Records, store.Store, error) {
	if loc == "" {
		return nil, nil, withCode(ExitUsage, errors.New("--detach: a detached run keeps its run and its status in a result store in a bucket: give --results gs://BUCKET/PREFIX or s3://BUCKET/PREFIX, or results.store in the eval config"))
	}
	if folder, ok, err := storeFolder(loc); err != nil {
		return nil, nil, withCode(ExitUsage, err)
	} else if ok {
		if loc == eval.DefaultResults {
			folder += " (the default, as neither --results nor the eval's results.store names a store)"
		}
		return nil, nil, withCode(ExitUsage, fmt.Errorf("--detach: the results go to the folder %s on this machine, which the coordinator machine cannot write and mst runs could not read once this machine is away: give --results gs://BUCKET/PREFIX or s3://BUCKET/PREFIX, or set results.store in the eval config", folder))
	}
	st, err := resultsStore(ctx, reg, loc, evalName)
	if err != nil {
		return nil, nil, err
	}
	d, ok := st.(store.DetachedRecords)
	if !ok {
		return nil, nil, withCode(ExitUsage, fmt.Errorf("--detach: the store at %s keeps no detached runs: give --results gs://BUCKET/PREFIX or s3://BUCKET/PREFIX", st.Location()))
	}
	return detach.NewRecords(d, evalName), st, nil
}

// refuseLocalCredentials refuses a detached run whose connector servers'
// grants are in a store other machines cannot reach.
func refuseLocalCredentials(used []string, f *storeFlags) error {
	if len(used) == 0 {
		return nil
	}
	name := f.name
	if name == "" {
		name = credstore.LocalName
	}
	reg := f.parts.CredentialStores()
	def, err := reg.Lookup(name)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("--store: %w", err))
	}
	if def.Shared {
		return nil
	}
	var shared []string
	for _, n := range reg.Names() {
		if d, _ := reg.Lookup(n); d.Shared {
			shared = append(shared, n)
		}
	}
	have := "this MST has none built in: a plugin provides one"
	if len(shared) > 0 {
		have = "this MST has " + strings.Join(shared, ", ")
	}
	how := ""
	if slices.Contains(shared, bucketcreds.Name) {
		how = fmt.Sprintf("; with --store %s the grants are kept encrypted in the results bucket, the key in your secrets file: `mst auth new-key >> SECRETS-FILE` once, then `mst auth SERVER -c EVAL --store %s --secrets-file SECRETS-FILE` for each connector server (docs/connectors.md)", bucketcreds.Name, bucketcreds.Name)
	}
	return withCode(ExitUsage, fmt.Errorf("--detach: the connector servers %s need their grants refreshed on the coordinator machine for the whole run, and the %s credential store is on this machine only (a copy would break as soon as a refresh token rotates): give --store NAME of a shared store (%s)%s", strings.Join(used, ", "), def.Name, have, how))
}

// planHostPaths are the paths on this machine the plan's servers use.
func planHostPaths(p *run.Plan) runner.HostPaths {
	return run.HostPaths(&shard.Bundle{Settings: p.Settings}, p.Config.Dir)
}

// coordinatorDeadline is how long the coordinator machine may live.
func coordinatorDeadline(f detachFlags, runDeadline time.Duration) time.Duration {
	switch {
	case f.deadline > 0:
		return f.deadline
	case runDeadline > 0:
		return runDeadline + time.Hour
	}
	return runner.DefaultCoordinatorDeadline
}

// refuseSharedDir refuses a launch whose runner's dir option names the
// folder of a live detached run of the eval on the same runner and
// machine: the two would share their machines' folders, and the second's
// coordinator would be refused there, long after this launch returned.
// It records the dir in s for the launches after it.
func refuseSharedDir(ctx context.Context, l detachLaunch, s *detach.Spec, now time.Time) error {
	dir := l.options["dir"]
	if dir == "" {
		return nil
	}
	s.Dir = absPath(dir)
	s.DirHost, _ = os.Hostname()
	list, _, err := l.records.List(ctx)
	if err != nil {
		return fmt.Errorf("--detach: reading the eval's detached runs, to learn whether one uses the dir %s: %w", s.Dir, err)
	}
	for _, o := range list {
		if o.Runner == s.Runner && o.Dir == s.Dir && o.DirHost == s.DirHost && o.Live(now) {
			return withCode(ExitUsage, fmt.Errorf("--detach: the runner %s's dir %s is in use by the detached run %s (%s, launched %s): two runs in one dir would share their folders; give this run another with --runner-option dir=ANOTHER-FOLDER, leave dir unset for a new temporary folder, or wait until mst runs watch %s shows it ended",
				s.Runner, s.Dir, o.ID, o.Shown(now), o.Launched.Local().Format(time.RFC3339), shortID(o.ID)))
		}
	}
	// The folders of any other run in it (another eval's, detached or
	// not) are marked with their owner, and the dir is on this machine.
	// (A detached run of this eval that its status says ended is not in
	// the way: its coordinator may still be clearing its folder.)
	ended := map[string]bool{}
	for _, o := range list {
		if !o.Live(now) {
			ended[o.ID] = true
		}
	}
	marks, _ := filepath.Glob(filepath.Join(s.Dir, "*", proctree.OwnerFile))
	for _, m := range marks {
		if o, err := proctree.ReadOwner(filepath.Dir(m)); err == nil && o.Alive() && !ended[o.Run] {
			what := "a run"
			if o.Run != "" {
				what = "the run " + o.Run
			}
			return withCode(ExitUsage, fmt.Errorf("--detach: the runner %s's dir %s is in use by %s (process %d, its folder %s): two runs in one dir would share their folders; give this run another with --runner-option dir=ANOTHER-FOLDER, or leave dir unset for a new temporary folder",
				s.Runner, s.Dir, what, o.PID, filepath.Dir(m)))
		}
	}
	return nil
}

// launchDetached makes the bundle, the coordinator machine, and starts the
// coordinator there; it prints the detached run's id once the coordinator
// has written its first status.
func launchDetached(ctx context.Context, stdout, stderr io.Writer, l detachLaunch) (err error) {
	s := l.spec
	now := time.Now().UTC()
	s.ID = detach.NewID(s.Eval, now)
	s.Launched = now
	life := coordinatorDeadline(l.flags, l.runDeadline)
	s.Deadline = now.Add(life)
	s.Heartbeat, s.LogEvery = detach.Duration(l.flags.heartbeat), detach.Duration(l.flags.logEvery)
	s.Secrets = l.secretNames
	if err := refuseSharedDir(ctx, l, s, now); err != nil {
		return err
	}

	bundle, err := runner.TempFolder("mst-detach-", s.ID)
	if err != nil {
		return err
	}
	defer os.RemoveAll(bundle)
	data, err := os.ReadFile(l.configFile)
	if err != nil {
		return fmt.Errorf("reading the eval config to ship: %w", err)
	}
	s.Config = filepath.Base(l.configFile)
	if err := os.WriteFile(filepath.Join(bundle, s.Config), data, 0o600); err != nil {
		return err
	}
	if err := dataset.WriteLoaded(filepath.Join(bundle, detach.DatasetsFile), l.datasets); err != nil {
		return err
	}
	if l.graders != nil {
		g, err := json.Marshal(map[string]any{"graders": l.graders})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(bundle, detach.GradersFile), g, 0o600); err != nil {
			return err
		}
		s.Graders = true
	}
	var secretsLine []byte
	if l.secretsFile != "" {
		content, err := os.ReadFile(l.secretsFile)
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("--secrets-file: %w", err))
		}
		secretsLine, err = json.Marshal(coordinateInput{SecretsFile: string(content)})
		if err != nil {
			return err
		}
	} else {
		secretsLine = []byte("{}")
	}

	status := detach.Status{ID: s.ID, Eval: s.Eval, Command: s.Command, State: detach.StateStarting, Runner: s.Runner, Launched: now, Deadline: s.Deadline, Run: s.Resume, Results: s.Results, Dir: s.Dir, DirHost: s.DirHost}
	status.Updated = now
	if err := l.records.WriteStatus(ctx, status); err != nil {
		return fmt.Errorf("--detach: the result store must take the detached run's status before any machine is made: %w", err)
	}
	// remote is the bundle's folder on the coordinator machine, once
	// known: the status in the store names it by what it is.
	var remote string
	failed := func(cause error) error {
		status.State, status.Error, status.Updated = detach.StateFailed, detach.Scrubber{Bundle: remote}.Text(cause.Error()), time.Now().UTC()
		end := status.Updated
		status.Ended = &end
		l.records.WriteStatus(context.WithoutCancel(ctx), status)
		return cause
	}
	fmt.Fprintf(stderr, "detaching %s: creating the coordinator machine on the runner %s\n", s.ID, s.Runner)
	exe, err := os.Executable()
	if err != nil {
		return failed(err)
	}
	m, err := l.rdef.Coordinator(ctx, runner.CoordinatorParams{
		Options: l.options, ID: s.ID, Deadline: life, MST: []string{exe}, MSTVersion: Version,
		HostPaths: l.hostPaths, Logger: l.logger,
	})
	if err != nil {
		return failed(fmt.Errorf("--detach: creating the coordinator machine on the runner %s: %w", s.Runner, err))
	}
	started := false
	defer func() {
		if c, ok := m.(io.Closer); ok {
			defer c.Close()
		}
		if !started {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if derr := m.Dispose(dctx); derr != nil {
				fmt.Fprintf(stderr, "mst: warning: removing the coordinator machine %s: %v\n", m.ID(), derr)
			}
		}
	}()
	s.Machine, s.Identity, s.MST, s.Env, s.Finish, s.WorkDir = m.ID(), m.Identity(), m.MST(), m.Env(), m.Finish(), m.WorkDir()
	status.Machine, status.Identity = s.Machine, s.Identity
	if err := detach.WriteSpec(bundle, s); err != nil {
		return failed(err)
	}
	remote = path.Join(m.WorkDir(), "detached", s.ID)
	if err := m.CopyTo(ctx, bundle, remote); err != nil {
		return failed(fmt.Errorf("--detach: copying the coordinator bundle to %s: %w", m.ID(), err))
	}
	var out, errOut bytes.Buffer
	argv := append(append([]string(nil), m.MST()...), "coordinate", "--bundle", remote)
	if err := m.Exec(ctx, argv, bytes.NewReader(append(secretsLine, '\n')), &out, &errOut); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return failed(fmt.Errorf("--detach: starting the coordinator on %s: %w\n%s", m.ID(), err, msg))
	}
	started = true
	if l.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"id": s.ID, "machine": s.Machine, "identity": s.Identity, "records": l.records.Where(s.ID), "deadline": s.Deadline})
	}
	fmt.Fprintln(stdout, s.ID)
	flags := runsFlagsFor(s)
	fmt.Fprintf(stderr, "the coordinator runs on %s (%s) until it ends, or until %s at the latest\n", s.Machine, s.Identity, s.Deadline.Format(time.RFC3339))
	fmt.Fprintf(stderr, "follow it:  mst runs watch %s%s\n", shortID(s.ID), flags)
	fmt.Fprintf(stderr, "cancel it:  mst runs cancel %s%s\n", shortID(s.ID), flags)
	return nil
}

// runsFlagsFor are the -c and --results flags mst runs needs for s.
func runsFlagsFor(s *detach.Spec) string {
	return " -c " + shellQuote(s.ConfigOrigin) + " --results " + shellQuote(s.Results)
}

// shortID is the part of a detached run's id that names it in mst runs.
func shortID(id string) string {
	if len(id) > 6 {
		return id[len(id)-6:]
	}
	return id
}

// coordinateInput is the one JSON line mst coordinate reads on its stdin.
type coordinateInput struct {
	// SecretsFile is the secrets file's content, "" for none.
	SecretsFile string `json:"secretsFile,omitempty"`
}

// fileProgress passes a run's progress on, and keeps a file up to date
// with its counts for a detached run's coordinator.
type fileProgress struct {
	run.Progress
	path string
	// grading says the command grades (mst grade): each trial reported
	// is a grade.
	grading bool

	mu      sync.Mutex
	p       detach.Progress
	last    time.Time
	pending bool
}

func newFileProgress(inner run.Progress, path string, grading bool) *fileProgress {
	return &fileProgress{Progress: inner, path: path, grading: grading}
}

// Start counts the whole run's trials, not only this step's: a resume
// (total trials to run) starts with the run's planned trials and those
// stored by the steps before it, and mst grade with the trials the run
// has stored, so that mst runs shows one count across a detached run's
// steps. A stored trial of a run that grades as it collects counts as
// graded.
func (f *fileProgress) Start(r transcript.Run, total int) {
	f.Progress.Start(r, total)
	f.mu.Lock()
	f.p.Run = r.ID
	planned := max(r.Counts.Planned, total)
	if f.grading {
		f.p.Planned, f.p.Collected, f.p.Graded = total, max(r.Counts.Planned-r.Counts.Missing, 0), 0
	} else {
		f.p.Planned, f.p.Collected, f.p.Graded = planned, planned-total, 0
		if !r.NoGrade {
			f.p.Graded = f.p.Collected
		}
	}
	f.writeLocked(true)
	f.mu.Unlock()
}

func (f *fileProgress) StartGrading(on string, total int) {
	if gp, ok := f.Progress.(interface{ StartGrading(string, int) }); ok {
		gp.StartGrading(on, total)
	}
}

func (f *fileProgress) Trial(t report.Trial) {
	f.Progress.Trial(t)
	f.mu.Lock()
	if f.grading {
		f.p.Graded++
	} else {
		f.p.Collected++
		if t.Graded || t.GradeError != "" {
			f.p.Graded++
		}
	}
	f.writeLocked(false)
	f.mu.Unlock()
}

func (f *fileProgress) Finish() {
	f.Progress.Finish()
	f.mu.Lock()
	f.writeLocked(true)
	f.mu.Unlock()
}

// set records what is known at the end (the grade set, the location).
func (f *fileProgress) set(fn func(*detach.Progress)) {
	f.mu.Lock()
	fn(&f.p)
	f.writeLocked(true)
	f.mu.Unlock()
}

// writeLocked rewrites the file, at most twice a second unless now; a
// change held back is written when that half second is over.
func (f *fileProgress) writeLocked(now bool) {
	if !now && time.Since(f.last) < progressEvery {
		if !f.pending {
			f.pending = true
			time.AfterFunc(progressEvery-time.Since(f.last), func() {
				f.mu.Lock()
				defer f.mu.Unlock()
				if f.pending {
					f.writeLocked(true)
				}
			})
		}
		return
	}
	f.pending = false
	f.last = time.Now()
	data, err := json.Marshal(f.p)
	if err == nil {
		atomicfile.Write(f.path, data)
	}
}

// progressEvery is how often a progress file is rewritten at most.
const progressEvery = 500 * time.Millisecond

// applyTo gives a plan request what a detached run's coordinator passes
// its mst run.
func (f *detachFlags) applyTo(req *run.Request) error {
	if f.loadedDatasets != "" {
		ds, err := dataset.ReadLoaded(f.loadedDatasets)
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("--loaded-datasets: %w", err))
		}
		req.Datasets = ds
	}
	req.ConfigDir, req.ConfigOrigin = f.configDir, f.configOrigin
	return nil
}

// detachRun launches mst run --detach, once the plan is checked.
func detachRun(ctx context.Context, parts *builtin.Parts, stdout, stderr io.Writer, f runFlags, plan *run.Plan, rdef *runner.Definition, chosen run.RunnerChoice, pairs []string, resumed store.Run, logger *slog.Logger) error {
	if f.gradeRunner != "" {
		if f.noGrade {
			return withCode(ExitUsage, errors.New("--grade-runner grades the run and --no-grade leaves it ungraded: give one of them"))
		}
		gdef, err := parts.Runners().Lookup(f.gradeRunner)
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("--grade-runner: %w", err))
		}
		if err := run.CheckGradeRunner(gdef, "--grade-runner"); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	if err := refuseLocalCredentials(plan.UsedConnectors(), &f.store); err != nil {
		return err
	}
	results := f.results
	if results == "" {
		results = plan.Results
	}
	resumeID := ""
	if resumed != nil {
		resumeID = resumed.ID()
		if f.results == "" {
			results = storeBase(resumed.Location(), plan.Config.Name, resumeID)
		}
	}
	records, _, err := detachedRecords(ctx, parts.ResultStores(), results, plan.Config.Name)
	if err != nil {
		return err
	}
	creds, err := connectorStore(ctx, plan, &f.store, logger)
	if err != nil {
		return err
	}
	origin, err := filepath.Abs(plan.Config.File)
	if err != nil {
		return err
	}
	spec := &detach.Spec{
		Command: detach.CommandRun, Eval: plan.Config.Name, ConfigOrigin: origin, ConfigDir: plan.Config.Dir,
		Results: results, Runner: rdef.Name, RunnerOptions: pairs, GradeRunner: f.gradeRunner,
		Variants: f.variants, Cases: f.cases, Trials: f.trials, Limit: f.limit,
		Resume: resumeID, RetryErrored: f.retryErrored, NoGrade: f.noGrade,
		RunDeadline: detach.Duration(f.deadline),
	}
	if f.maxErroredSet {
		spec.MaxErrored = f.maxErrored
	}
	if f.store.name != "" && f.store.name != credstore.LocalName {
		spec.Store, spec.StoreOptions = f.store.name, f.store.options
		if b, ok := creds.(*bucketcreds.Store); ok && !slices.ContainsFunc(f.store.options, func(o string) bool { return strings.HasPrefix(o, bucketcreds.OptionURL+"=") }) {
			// The coordinator keeps to the grants checked here, even
			// where its results store is named otherwise (a resume's).
			spec.StoreOptions = append(slices.Clone(f.store.options), bucketcreds.OptionURL+"="+b.Location())
		}
	}
	return launchDetached(ctx, stdout, stderr, detachLaunch{
		spec: spec, rdef: rdef, options: chosen.Options, configFile: plan.Config.File, datasets: plan.Loaded,
		secretsFile: f.secretsFile, secretNames: secretNames(f.secretsFile), hostPaths: planHostPaths(plan),
		records: records, flags: f.detach, runDeadline: f.deadline, json: f.json, logger: logger,
	})
}

// secretNames are the names the secrets file at path sets.
func secretNames(path string) []string {
	if path == "" {
		return nil
	}
	set, err := secrets.Load(path)
	if err != nil {
		return nil
	}
	return set.Names()
}

// storeBase is the URL of the store that holds the run at loc (a run's
// URL: STORE/EVAL/runs/ID, with any query after).
func storeBase(loc, eval, id string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return loc
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/"+store.SafeName(eval)+"/runs/"+id)
	u.RawPath = ""
	return u.String()
}

// detachGrade launches mst grade RUN --runner NAME --detach.
func detachGrade(ctx context.Context, parts *builtin.Parts, stdout, stderr io.Writer, f gradeFlags, st store.Run, runID string, cfg *eval.Config, configPath string, specs []json.RawMessage, logger *slog.Logger) error {
	rdef, err := parts.Runners().Lookup(f.runner)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("--runner: %w", err))
	}
	if err := refuseDetach(parts, rdef, "--runner"); err != nil {
		return err
	}
	if cfg == nil {
		return withCode(ExitUsage, fmt.Errorf("--detach: the coordinator machine needs the eval config: give -c EVAL (%s could not be loaded)", configPath))
	}
	chosen, err := run.ParseRunnerOptions(rdef, f.runnerOptions, nil)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	results := f.results
	if results == "" || !isURL(results) {
		results = storeBase(st.Location(), cfg.Name, runID)
	}
	records, _, err := detachedRecords(ctx, parts.ResultStores(), results, cfg.Name)
	if err != nil {
		return err
	}
	origin, err := filepath.Abs(cfg.File)
	if err != nil {
		return err
	}
	spec := &detach.Spec{
		Command: detach.CommandGrade, Eval: cfg.Name, ConfigOrigin: origin, ConfigDir: cfg.Dir,
		Results: results, Runner: rdef.Name, RunnerOptions: f.runnerOptions, Resume: runID, GradeSet: f.resume,
	}
	var graders []json.RawMessage
	if f.graders != "" {
		graders = specs
	}
	return launchDetached(ctx, stdout, stderr, detachLaunch{
		spec: spec, rdef: rdef, options: chosen.Options, configFile: cfg.File, graders: graders,
		secretsFile: f.secretsFile, secretNames: secretNames(f.secretsFile),
		hostPaths: runner.HostPaths{ConfigDir: cfg.Dir}, records: records, flags: f.detach, json: f.json, logger: logger,
	})
}
