// Package run carries out `mst run`, the hub between the parts: a Plan
// decides every trial and its setting once (plan.go); Execute creates the
// run in a result store (or reopens it to resume it), splits the trials into
// shards of whole cases, runs each shard through a runner under one
// coordinator, grades each trial once as its transcript arrives, and
// gathers the run into its record and report. LoadReport builds the report
// of a stored run, grading only what has no grade; Regrade (regrade.go)
// grades a stored run again into a new grade set, and grading.go holds
// what grading shares: judges' keys and limits, and parallel grading.
//
// The flow of one trial:
//
//	Plan ─ Setting ─▶ bundle ─▶ runner (transport) ─▶ worker: client session ─▶ transcript
//	     coordinator ◀─ trial message (+ bytes fetched back) ◀─┘
//	     collector: store transcript ─▶ grade ─▶ append grade ─▶ progress
//	     gather: grade what is still ungraded ─▶ counts, report
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/engine/traces"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Options are how a plan is executed.
type Options struct {
	// Store holds runs; a new run is created in it. A resumed run is the
	// plan's own.
	Store store.Store
	// Clients are the clients an in-process worker opens.
	Clients *client.Registry
	// Plugins are this process's plugin versions: each bundle lists those
	// its workers must have, and an in-process worker reports them.
	Plugins shard.PluginVersions
	// Runner runs the shards, with the --runner-option values chosen.
	Runner *runner.Definition
	Chosen RunnerChoice
	// Secrets are what clients may read (keys); the coordinator hands them
	// to workers, and every one is redacted from what is stored.
	Secrets *secrets.Set
	// Redact removes secret values from everything the run stores.
	Redact   *secrets.Redactor
	Progress Progress
	Logger   *slog.Logger
	// MSTVersion is this MST's version, checked at every worker's hello;
	// MST is the command that runs this mst binary here.
	MSTVersion string
	MST        []string
	// Now returns the current time (tests pin it); nil means time.Now.
	Now func() time.Time
	// Heartbeat, Silence and StopGrace set the protocol's intervals (a
	// worker's heartbeat, how long a silent worker is waited for, how long
	// a worker gets to end once its stdin closes); zero means the
	// defaults. Tests set them short.
	Heartbeat, Silence, StopGrace time.Duration
	// MachineDeadline is how long each machine the runner creates may
	// live (runner.Params.Deadline); zero is the runner's default.
	MachineDeadline time.Duration
	// Credentials is the credential store that holds the grants of the
	// plan's connector servers (mst auth); the coordinator mints their
	// access tokens from it for the workers. nil: workers get none, and
	// the trials that use a connector server error.
	Credentials credstore.Store
	// GradeOn, when set, grades the run on a runner's machines once its
	// trials are collected (mst run --grade-runner), instead of here as
	// each trial arrives.
	GradeOn *GradeOn
	// Started, when set, is called once the run's first record is stored,
	// with the run and its store: from then on a resume can finish it.
	Started func(st store.Run, rec transcript.Run)
	// OutageLimit is how long the run goes on while its store keeps none
	// of its trials' transcripts (at least 3 in a row): then it stops, as
	// partial, rather than run trials it cannot keep. Zero means
	// DefaultOutageLimit.
	OutageLimit time.Duration
	// CleanupGrace, when positive, bounds what the run still does with
	// its store after an interrupt (ctx cancelled without another cause):
	// reading its trials back and writing its record. What is not done by
	// then is left to a resume; zero waits for the store however long it
	// takes.
	CleanupGrace time.Duration
}

// ErrCleanupGrace is the cause of the context that bounds a run's last
// store work after an interrupt (Options.CleanupGrace).
var ErrCleanupGrace = errors.New("the store did not finish recording the interrupted run in time")

// Outcome is what a run produced.
type Outcome struct {
	Store  store.Run
	Run    transcript.Run
	Report report.Report
	// GradeError says why grading on the runner (Options.GradeOn) left
	// trials ungraded; the run itself is whole.
	GradeError error
}

// Execute runs the plan. It returns the run even when it is partial (Ctrl-C,
// a lost shard); the error says why a run could not run at all.
func Execute(ctx context.Context, p *Plan, o Options) (*Outcome, error) {
	// A plan built or changed in Go is held to what files are held to,
	// before any runner, server or client starts.
	if err := p.Validate(o.Clients); err != nil {
		return nil, err
	}
	if p.settingOf == nil {
		// A plan built in Go: its settings are found by variant, on a
		// copy, so the caller's plan stays as it was given.
		q := *p
		q.indexSettings()
		p = &q
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tr := startTraces(ctx, o) // nil unless OTEL_EXPORTER_OTLP_* names a collector (traces.go)
	defer tr.Shutdown()       // bounded: flushes the last spans before the run returns
	var (
		st  store.Run
		rec transcript.Run
	)
	// The runner is made before the run is stored, so a runner that
	// cannot start (a bad host key, no Docker) leaves no run behind. Its
	// in-process worker, if any, writes to st once it exists.
	rn, err := o.Runner.New(ctx, runner.Params{
		Options: o.Chosen.Options, Shards: o.Chosen.Shards, Keep: o.Chosen.Keep, Logger: o.Logger,
		MST: o.MST, MSTVersion: o.MSTVersion, Secrets: o.Secrets, StopGrace: o.StopGrace, Heartbeat: o.Heartbeat,
		Deadline: o.MachineDeadline, HostExclusive: p.hostExclusive(o.Clients),
		InProcess: inProcess(func() store.Run { return st }, o, o.Runner.Name),
	})
	if err != nil {
		return nil, err
	}
	defer rn.Close()
	// This process is the run's one writer until Execute returns (or the
	// process dies, which lets the lock go): a second mst run, a resume of
	// a live run, or two resumes at once are refused, naming the owner.
	owner := Self(now())
	var release func() error
	if p.Resume != nil {
		st, rec = p.Resume.Store, p.Resume.Record
		if release, err = st.Lock(ctx, owner); err != nil {
			return nil, err
		}
		rec.Resumes++
		rec.Collect = transcript.CollectRunning
		rec.Ended = time.Time{}
		rec.Note = ""
	} else {
		started := now().UTC()
		id := newRunID(p.Config.Name, started)
		if st, err = o.Store.Create(ctx, id, o.Redact); err != nil {
			return nil, err
		}
		if release, err = st.Lock(ctx, owner); err != nil {
			return nil, err
		}
		rec = transcript.Run{
			Kind: "mst.run", Version: transcript.RunVersion, ID: id, Eval: p.Config.Name,
			ConfigFile: p.Config.File, ConfigHash: p.Config.Hash, MSTVersion: o.MSTVersion,
			Started: started, Selection: p.Selection, Variants: p.Variants, Cases: len(p.Cases), Trials: p.Trials,
			Collect: transcript.CollectRunning, NoGrade: p.NoGrade,
		}
		if abs, err := filepath.Abs(p.Config.File); err == nil && p.Config.File != "" {
			rec.ConfigPath = abs
		}
		if p.ConfigOrigin != "" {
			rec.ConfigFile, rec.ConfigPath = p.ConfigOrigin, p.ConfigOrigin
		}
	}
	defer func() {
		// A lock that cannot be let go (the store stopped answering at
		// the very end) lapses with its lease: say so, or the next
		// resume's refusal would blame a process that has exited.
		if err := release(); err != nil {
			o.Logger.Warn("could not release the run's lock; a resume can take the run once the lock's lease runs out (a minute by default)", "run", rec.ID, "err", err)
		}
	}()
	rec.Owner = &owner
	// A write the store refuses for want of space stops the run, so no
	// more trials are run only to be lost; the error says how to resume.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	st = &fullGuard{Run: st, stop: stop}
	if p.Resume == nil {
		if err := writeRunFiles(ctx, st, p); err != nil {
			return nil, err
		}
	}
	rec.Runner = transcript.RunnerInfo{
		Name: o.Runner.Name, Options: o.Chosen.Options, Shards: o.Chosen.Shards, Keep: o.Chosen.Keep,
		Machines: rec.Runner.Machines,
	}
	rec.Runner.Split, rec.Runner.ShardTrials = p.splitOf(o.Chosen.Shards, o.Logger) // split.go
	rec.Counts.Planned = p.Size()
	if err := st.WriteRun(ctx, rec); err != nil {
		return nil, err
	}
	if o.Started != nil {
		o.Started(st, rec)
	}

	// A trial whose transcript this attempt replaces loses its grade
	// first: should the run die between the new transcript and its grade,
	// the old grade cannot pass for the new transcript's.
	if p.Resume != nil && len(p.Resume.Replace) > 0 {
		var marks []grade.TrialGrade
		for pt := range shard.AllTrials(p.Resume.Todo) {
			if pt.Replace {
				marks = append(marks, grade.TrialGrade{Key: pt.Key, Superseded: true})
			}
		}
		if err := st.AppendGrades(ctx, marks...); err != nil {
			return nil, err
		}
	}
	todo := p.todo()
	col := &collector{st: st, plan: p, progress: o.Progress, logger: o.Logger, grading: p.grading(o)}
	col.outage = &outage{location: st.Location(), limit: o.OutageLimit, now: now, stop: stop}
	if col.outage.limit <= 0 {
		col.outage.limit = DefaultOutageLimit
	}
	if o.GradeOn != nil {
		// Graded on the runner once collected: nothing is graded here,
		// and no judge runs here.
		col.grading.off, col.grading.judges = true, nil
	}
	col.batching, col.lastFlush = isRemote(st), now()
	col.traces = tr
	if o.Progress != nil {
		o.Progress.Start(rec, shard.CountTrials(todo))
	}
	machines, err := runShards(ctx, p, o, rn, rec, todo, col)
	col.wait() // the judges still grading finish
	if o.Progress != nil {
		o.Progress.Finish()
	}
	if err != nil {
		return nil, err
	}
	rec.Runner.Machines = append(rec.Runner.Machines, machines...)
	rec.Stopped = col.stoppedVariants()
	var gradeErr error
	if o.GradeOn != nil && !p.NoGrade && ctx.Err() == nil {
		gradeErr = gradeCollected(ctx, st, p, o, rec)
		// What the runner did not grade is graded here by the
		// deterministic graders when gathering; a judge's grade waits
		// for mst grade (notJudged).
		col.grading = p.grading(o)
		col.grading.judges = nil
	}
	interrupted := ctx.Err() != nil
	// Why the run ended early: Ctrl-C (context.Canceled) or a cause its
	// caller gave, such as a deadline.
	why := "interrupted"
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		why = c.Error()
	}
	full := context.Cause(ctx)
	if !errors.Is(full, ErrStoreFull) {
		full = nil
	}
	// What is left records the run: it runs to its end after a Ctrl-C too,
	// so the run's record and grades are whole, unless the store takes
	// longer than CleanupGrace after an interrupt: a person is waiting,
	// and what is stored is kept for a resume anyway.
	runCause := context.Cause(ctx)
	byPerson := interrupted && errors.Is(runCause, context.Canceled)
	ctx = context.WithoutCancel(ctx)
	if byPerson && o.CleanupGrace > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.CleanupGrace, ErrCleanupGrace)
		defer cancel()
	}

	// Gather: the store is the truth, whatever this attempt did. The
	// report is built as the store is read, and the run's counts are of
	// the trials this run planned.
	in := p.reportInput(rec)
	in.NotGraded = p.NoGrade
	b := report.NewBuilder(in)
	counts, err := p.gather(ctx, st, col.grading, b)
	if err != nil {
		if full != nil {
			// The record cannot be written either; it says running, and
			// readers show it interrupted once this process is gone.
			return &Outcome{Store: st, Run: rec}, full
		}
		// The store stopped answering (a bucket out of reach): what was
		// stored is kept, and the run is finished by a resume once the
		// store is back.
		if errors.Is(context.Cause(ctx), ErrCleanupGrace) {
			return &Outcome{Store: st, Run: rec}, fmt.Errorf("interrupted, and %s (%s): %w", ErrCleanupGrace, o.CleanupGrace, err)
		}
		if outage, ok := errors.AsType[*StoreOutageError](runCause); ok {
			return &Outcome{Store: st, Run: rec}, fmt.Errorf("%w; reading the run back from its store failed too: %w", outage, err)
		}
		return &Outcome{Store: st, Run: rec}, fmt.Errorf("reading the run back from its store: %w", err)
	}
	rec.Ended = now().UTC()
	rec.Counts = counts
	rec.Collect = transcript.CollectComplete
	switch c := rec.Counts; {
	case c.Missing > 0 || c.Cancelled > 0 || c.Skipped > 0:
		rec.Collect = transcript.CollectPartial
	case c.Errored > 0 && c.Answered+c.NoAnswer+c.TimedOut == 0:
		rec.Collect = transcript.CollectErrored
	}
	var notes, failed []string
	switch {
	case full != nil:
		notes = append(notes, full.Error())
	case interrupted:
		notes = append(notes, why)
	}
	for _, m := range machines {
		if m.Error != "" {
			failed = append(failed, m.Error)
		}
	}
	for _, sv := range rec.Stopped {
		notes = append(notes, fmt.Sprintf("variant %s stopped after its first trials errored (%s)", sv.Variant, sv.Cause))
	}
	notes = append(notes, failed...)
	if gradeErr != nil {
		notes = append(notes, "grading on the runner: "+gradeErr.Error())
	}
	rec.Note = strings.Join(notes, "; ")
	if err := st.WriteRun(ctx, rec); err != nil {
		return &Outcome{Store: st, Run: rec}, err
	}
	b.SetRun(rec)
	if !p.NoGrade {
		b.SetGradeSet(firstSetInfo(ctx, st))
	}
	out := &Outcome{Store: st, Run: rec, Report: b.Report(), GradeError: gradeErr}
	if full != nil {
		return out, full
	}
	if len(failed) > 0 && len(failed) == len(machines) && col.total() == 0 {
		return out, errors.New(strings.Join(failed, "\n"))
	}
	return out, nil
}

// runShards makes the runner, runs every shard of todo under one
// coordinator, and returns each shard's machine record.
func runShards(ctx context.Context, p *Plan, o Options, rn runner.Runner, rec transcript.Run, todo []shard.Series, col *collector) ([]transcript.Machine, error) {
	bundles := p.split(rec, todo, max(o.Chosen.Shards, 1))
	for _, b := range bundles {
		// Every Go plugin, and the program plugins whose clients the
		// shard runs: its worker must have them at these versions.
		var namespaces []string
		for _, s := range b.Settings {
			if ns, _, ok := strings.Cut(s.Client, "/"); ok && !slices.Contains(namespaces, ns) {
				namespaces = append(namespaces, ns)
			}
		}
		b.Plugins = o.Plugins.For(namespaces)
	}
	// With the run in a bucket, the workers of machine runners write each
	// transcript there themselves and the coordinator reads it from there;
	// the local runner's worker writes into the store it is given anyway.
	direct := o.Runner.Name != runner.LocalDefinition().Name && isRemote(col.st)
	if direct {
		for _, b := range bundles {
			b.Store = col.st.Location()
		}
	}
	coord := &shard.Coordinator{
		MSTVersion: o.MSTVersion,
		Limits:     shard.NewLimiter(p.Config.Limits.Providers, p.Config.Limits.Servers).WithServerCalls(p.Config.Limits.ServerCalls),
		Events:     col,
		Logger:     o.Logger,
		Secrets:    p.workerSecrets(o.Secrets), // no judge's key (grading.go)
		Silence:    o.Silence,
		Gate:       col.gate(rec.ID, o.Redact),
		// A worker reports only its own shard's trials, and its machine
		// must run its clients (the OS checks that waited for hello).
		Bundles:    bundles,
		CheckHello: HelloCheck(p.Config.File, o.Clients),
	}
	if col.grading.judges != nil {
		col.grading.judges.Acquire = JudgeLimits(coord.Limits) // judges share the trials' caps
	}
	coord.TokenSource = connectorTokens(p, o)
	staging, err := runner.TempFolder("mst-bundles-", rec.ID)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	attempt := rec.Resumes + 1
	machines := make([]transcript.Machine, len(bundles))
	var wg sync.WaitGroup
	for i, b := range bundles {
		dir := filepath.Join(staging, fmt.Sprint(b.Shard))
		if err := shard.WriteBundle(dir, b); err != nil {
			return nil, fmt.Errorf("writing the bundle of shard %d: %w", b.Shard, err)
		}
		wg.Go(func() {
			var res shard.ShardResult
			rep, err := rn.RunShard(ctx, runner.Shard{
				Index: b.Shard, Run: rec.ID, Attempt: attempt, BundleDir: dir, HostPaths: p.hostPaths(b),
				Serve: func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
					var serr error
					f := shard.Fetch(fetch)
					if direct {
						f = nil // the transcripts are in the store already
					}
					res, serr = coord.Serve(ctx, b.Shard, in, out, f)
					return serr
				},
			})
			machines[i] = machineRecord(b, rep, res, err, ctx, attempt)
			if err != nil {
				o.Logger.Warn("shard ended badly", "shard", b.Shard, "err", err)
			}
		})
	}
	wg.Wait()
	return machines, nil
}

// inProcess is the worker of the local runner: it runs in this process and
// writes transcripts into the run's store itself.
func inProcess(results func() store.Run, o Options, runnerName string) runner.InProcess {
	return func(ctx context.Context, bundleDir string, in io.Reader, out io.Writer) error {
		b, err := shard.ReadBundle(bundleDir)
		if err != nil {
			return err
		}
		work, err := runner.TempFolder("mst-work-", b.Run.ID)
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		w := &shard.Worker{
			Clients: o.Clients, Plugins: o.Plugins, Results: results(), Environment: Environment(runnerName),
			Logger: o.Logger, MSTVersion: o.MSTVersion, WorkDir: work, Heartbeat: o.Heartbeat,
		}
		return w.Run(ctx, b, in, out)
	}
}

// split puts the trials of todo (series of the plan's settings) into
// shards by case (placement, split.go), each bundle holding only its own
// cases and settings. Empty shards are left out.
func (p *Plan) split(rec transcript.Run, todo []shard.Series, n int) []*shard.Bundle {
	byCase := make(map[string]*dataset.Case, len(p.Cases))
	for i := range p.Cases {
		byCase[p.Cases[i].ID] = &p.Cases[i]
	}
	type acc struct {
		b        *shard.Bundle
		cases    map[string]bool
		settings map[int]int // plan's index → bundle's
	}
	accs := make([]*acc, n)
	where, _ := p.placement(rec.Runner.Split, todo, n)
	for _, s := range todo {
		i := where[s.Case]
		a := accs[i]
		if a == nil {
			a = &acc{b: &shard.Bundle{Run: rec, Shard: i, Concurrency: p.Config.Limits.Concurrency}, cases: map[string]bool{}, settings: map[int]int{}}
			accs[i] = a
		}
		if !a.cases[s.Case] {
			a.cases[s.Case] = true
			a.b.Cases = append(a.b.Cases, *byCase[s.Case])
		}
		bi, ok := a.settings[s.Setting]
		if !ok {
			bi = len(a.b.Settings)
			a.settings[s.Setting] = bi
			a.b.Settings = append(a.b.Settings, p.Settings[s.Setting])
		}
		s.Setting = bi
		a.b.Series = append(a.b.Series, s)
	}
	var out []*shard.Bundle
	for _, a := range accs {
		if a != nil {
			out = append(out, a.b)
		}
	}
	return out
}

// hostPaths lists the absolute paths on this machine a bundle's servers
// use, for runners that mount them into their machines.
func (p *Plan) hostPaths(b *shard.Bundle) runner.HostPaths {
	return HostPaths(b, p.Config.Dir)
}

// HostPaths lists the absolute paths on this machine that the servers of
// bundle b use (their commands, working folders and the absolute paths in
// their arguments), with the eval config's folder, for runners whose
// machines can mount them (docker).
func HostPaths(b *shard.Bundle, configDir string) runner.HostPaths {
	hp := runner.HostPaths{ConfigDir: configDir}
	for _, set := range b.Settings {
		for _, s := range set.Servers {
			if filepath.IsAbs(s.Command) && !slices.Contains(hp.Commands, s.Command) {
				hp.Commands = append(hp.Commands, s.Command)
			}
			if filepath.IsAbs(s.Dir) && !slices.Contains(hp.Dirs, s.Dir) {
				hp.Dirs = append(hp.Dirs, s.Dir)
			}
			for _, a := range s.Args {
				if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
					a = v
				}
				if filepath.IsAbs(a) && !slices.Contains(hp.Args, a) {
					hp.Args = append(hp.Args, a)
				}
			}
		}
	}
	return hp
}

func (p *Plan) replaced() map[transcript.Key]bool {
	if p.Resume == nil {
		return nil
	}
	return p.Resume.Replace
}

func machineRecord(b *shard.Bundle, rep runner.ShardReport, res shard.ShardResult, err error, ctx context.Context, attempt int) transcript.Machine {
	m := transcript.Machine{Shard: b.Shard, ID: rep.Machine, Image: rep.Image, Trials: b.Size(), Attempt: attempt, Ended: "done", Kept: rep.Kept}
	if h := res.Hello; h != nil {
		m.MSTVersion, m.ClientVersions, m.OS = h.MSTVersion, h.ClientVersions, h.OS
		// What the worker says it runs in, from its own machine, over
		// what the runner meant to start.
		if h.ImageDigest != "" {
			m.Image = h.ImageDigest
		}
	}
	if d := res.Done; d != nil {
		m.CleanupOK = d.CleanupOK
	}
	switch {
	case err != nil && errors.Is(err, shard.ErrWorkerLost):
		m.Ended, m.Error = "lost", err.Error()
	case err != nil:
		m.Ended, m.Error = "failed", err.Error()
	case ctx.Err() != nil:
		m.Ended = "cancelled"
	}
	return m
}

func writeRunFiles(ctx context.Context, st store.Run, p *Plan) error {
	if b, err := os.ReadFile(p.Config.File); err == nil {
		if err := st.WriteConfig(ctx, filepath.Base(p.Config.File), b); err != nil {
			return err
		}
	}
	if err := st.WriteCases(ctx, p.Cases); err != nil {
		return err
	}
	return st.WriteGraders(ctx, p.Config.Graders)
}

// newRunID names a run: the eval's name, the start time and a random
// suffix, so ids sort by time and never collide.
func newRunID(name string, t time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s", name, t.Format("20060102-150405"), hex.EncodeToString(b[:]))
}

// Environment describes this machine for transcripts.
func Environment(runnerName string) transcript.Environment {
	return transcript.Environment{Runner: runnerName, OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// collector takes each trial as its worker reports it: it stores a
// transcript fetched from another machine, grades the trial (the one time
// it is graded in a run), appends the grade and shows progress. It keeps
// nothing, so memory stays flat.
type collector struct {
	st       store.Run
	plan     *Plan
	progress Progress
	logger   *slog.Logger

	// grading grades each trial; trials whose graders include a judge
	// are graded apart (judges.go: a queue and grading.workers
	// goroutines), so a slow model never holds up the worker's messages.
	grading grading
	judges  judgeQueue

	// batch holds grades not stored yet, for a store where each append
	// is an object of its own (a bucket): they are stored together every
	// few seconds, and what a crash loses of them is graded again.
	batching  bool
	batchMu   sync.Mutex
	batch     []grade.TrialGrade
	lastFlush time.Time

	mu   sync.Mutex
	n    int
	stop *StopGate // the coordinator's gate, fed here (stop.go)

	traces *traces.Exporter // exports each trial's spans; nil: none

	// outage stops the run when its store keeps no transcript for too
	// long (outage.go); nil: never.
	outage *outage
}

func (c *collector) Trial(shardIndex int, m *protocol.Trial, data []byte) {
	ctx := context.Background() // a trial reported after Ctrl-C is still kept
	t, err := c.take(ctx, m.Key, data)
	if err != nil {
		// The trial stays missing; how it ended counted towards stopping
		// its variant when it was reported (Reported).
		c.logger.Warn("a trial's transcript could not be stored; it stays missing", "shard", shardIndex, "trial", m.Key.String(), "err", err)
		if errors.Is(err, store.ErrUnavailable) {
			c.outage.failed()
		}
		return
	}
	c.outage.stored()
	c.describe(m.Key, t.Outcome.Detail)
	c.traces.Trial(t)
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	if c.grading.judges != nil && grade.HasJudge(c.grading.graders(t.Case)) && !c.grading.off {
		// Queued: the coordinator's reading of the worker never waits
		// for a judge.
		c.judges.add(ctx, c, t)
		return
	}
	c.gradeTrial(ctx, t)
}

// gradeBatch bounds how long grades wait to be stored in a bucket.
const gradeFlushEvery = 2 * time.Second

// gradeTrial grades t, stores its grade and shows it.
func (c *collector) gradeTrial(ctx context.Context, t *transcript.Transcript) {
	g, keep := c.grading.grade(ctx, t)
	if keep && c.batching {
		c.batchMu.Lock()
		c.batch = append(c.batch, g)
		due := len(c.batch) >= gradeBatch || time.Since(c.lastFlush) >= gradeFlushEvery
		c.batchMu.Unlock()
		if due {
			c.flushGrades(ctx)
		}
	} else if keep {
		if err := c.st.AppendGrades(ctx, g); err != nil {
			// Gathering grades it again.
			c.logger.Warn("storing a grade failed", "trial", t.Key.String(), "err", err)
		}
	}
	if c.progress != nil {
		c.progress.Trial(report.NewTrial(g))
	}
}

// flushGrades stores the batched grades.
func (c *collector) flushGrades(ctx context.Context) {
	c.batchMu.Lock()
	gs := c.batch
	c.batch, c.lastFlush = nil, time.Now()
	c.batchMu.Unlock()
	if len(gs) == 0 {
		return
	}
	if err := c.st.AppendGrades(ctx, gs...); err != nil {
		// Gathering grades them again.
		c.logger.Warn("storing grades failed", "grades", len(gs), "err", err)
	}
}

// wait waits for the trials still being judged, and stores the grades
// still batched.
func (c *collector) wait() {
	c.judges.wait()
	c.flushGrades(context.Background())
}

// take returns the transcript of key: decoded from data and stored, or
// read from the store the worker wrote it to.
func (c *collector) take(ctx context.Context, key transcript.Key, data []byte) (*transcript.Transcript, error) {
	if data == nil {
		return c.st.ReadTranscript(ctx, key)
	}
	t, err := transcript.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("the worker's transcript: %w", err)
	}
	if t.Key != key {
		return nil, fmt.Errorf("the worker reported %s and sent the transcript of %s", key, t.Key)
	}
	write := c.st.WriteTranscript
	if c.plan.replaced()[key] {
		write = c.st.ReplaceTranscript
	}
	if _, err := write(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

func (c *collector) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// gather reads the run back from st once its trials are in: it grades
// every trial that has a transcript and no current grade (a crash between
// the two, a grade superseded by a resume), stores those grades (a store
// that refuses them fails the run), gives b every trial's report record,
// and counts the trials this attempt's plan holds by how they ended.
// Transcripts of trials outside the run's plan are left alone. What it
// keeps grows by a few bytes per planned trial (reconcile).
func (p *Plan) gather(ctx context.Context, st store.Run, how grading, b *report.Builder) (transcript.Counts, error) {
	plan := newPlanIndex(transcript.Run{Variants: p.Variants, Trials: p.Trials}, p.Cases)
	// ours marks the slots of this attempt's plan, when it is not the
	// whole of the run's (a --limit, a --case): one bit a trial.
	var ours []uint64
	if p.Size() != plan.size() {
		ours = make([]uint64, (plan.size()+63)/64)
		for k := range p.AllKeys() {
			if s, ok := plan.slot(k); ok {
				ours[s/64] |= 1 << (s % 64)
			}
		}
	}
	counts := transcript.Counts{Planned: p.Size()}
	_, err := reconcile(ctx, st, st, plan, p.Cases, how, func(err error) error { return err }, func(s int, t report.Trial) {
		b.Add(t)
		if ours == nil || ours[s/64]&(1<<(s%64)) != 0 {
			counts.Add(t.Status)
		}
	})
	counts.Missing = counts.Planned - counts.Done()
	return counts, err
}

func (p *Plan) reportInput(rec transcript.Run) report.Input {
	in := report.Input{Run: rec}
	for _, name := range p.Variants {
		v := p.Config.Variants[name]
		in.Variants = append(in.Variants, report.VariantInfo{Name: name, Client: v.Client, Model: v.Model, Description: v.Description})
	}
	for _, cs := range p.Cases {
		in.Cases = append(in.Cases, cs.ID)
	}
	return in
}

// isRemote says st is kept outside this machine's folders (a bucket).
func isRemote(st store.Run) bool {
	if g, ok := st.(*fullGuard); ok {
		st = g.Run
	}
	r, ok := st.(store.Remote)
	return ok && r.Remote()
}

// connectorTokens is the coordinator's token source for the plan's
// connector servers: access tokens minted from o.Credentials' grants,
// refreshed there (the grants never leave this process). nil when the
// plan has none or there is no store.
func connectorTokens(p *Plan, o Options) shard.TokenSource {
	if o.Credentials == nil || len(p.UsedConnectors()) == 0 {
		return nil
	}
	names := map[string]string{}
	for server, token := range p.ConnectorTokens() {
		names[token] = server
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return shardTokens{&credstore.Tokens{Store: o.Credentials, Eval: p.Config.File, Logger: log}, names, log}
}

// hostExclusive reports whether a client of the plan needs the host its
// machines run on to itself.
func (p *Plan) hostExclusive(clients *client.Registry) bool {
	if clients == nil {
		return false
	}
	for _, s := range p.Settings {
		if d, err := clients.Lookup(s.Client); err == nil && d.HostExclusive {
			return true
		}
	}
	return false
}
