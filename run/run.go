// Package run carries out `mst run`: it plans an eval's trials, makes the
// run folder (or reopens one to resume it), splits the trials into shards
// of whole cases, runs the shards through a runner under one coordinator,
// and gathers the run folder into grades.json and run.json.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/eval"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/report"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Options is one `mst run`.
type Options struct {
	Config *eval.Config
	// Cases are the cases to run, already selected, in dataset order.
	Cases []dataset.Case
	// Variants are the variant names to run, in display order.
	Variants []string
	// Trials per case (the config's unless a flag overrides it).
	Trials    int
	Selection transcript.Selection
	// Results is the folder that holds runs.
	Results string
	Clients *client.Registry
	// Secrets are what clients may read (keys); the coordinator hands them
	// to workers, and every one is redacted from what is stored.
	Secrets *secrets.Set
	// Redact removes secret values from every file of the run folder the
	// coordinator writes; nil removes nothing.
	Redact     *secrets.Redactor
	Progress   Progress
	Logger     *slog.Logger
	MSTVersion string
	// Runner runs the shards; Shards is how many.
	Runner     runner.Runner
	RunnerInfo transcript.RunnerInfo
	Shards     int
	// Resume continues this stored run instead of starting one: it runs
	// exactly the trials without a valid transcript (missing or cancelled,
	// and errored ones too with RetryErrored) into the same folder.
	Resume       *store.Run
	RetryErrored bool
	// Now returns the current time (tests pin it); nil means time.Now.
	Now func() time.Time
}

// Outcome is what a run produced.
type Outcome struct {
	Store  *store.Run
	Run    transcript.Run
	Report report.Report
}

// ErrConfigChanged means a run cannot be resumed with this config.
var ErrConfigChanged = errors.New("the eval config changed since the run")

// Execute runs the eval. It returns the run even when it is partial (Ctrl-C,
// a lost shard); the error says why a run could not run at all.
func Execute(ctx context.Context, o Options) (*Outcome, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	variants, err := resolveVariants(o)
	if err != nil {
		return nil, err
	}
	caseGraders, err := gradersByCase(o.Config.Graders, o.Cases)
	if err != nil {
		return nil, err
	}

	var (
		st  *store.Run
		rec transcript.Run
	)
	planned := plan(o.Cases, o.Variants, o.Trials)
	todo := planned
	if o.Resume != nil {
		st = o.Resume
		st.Redact = o.Redact
		if rec, err = st.ReadRun(); err != nil {
			return nil, err
		}
		if rec.ConfigHash != o.Config.Hash {
			return nil, fmt.Errorf("%w: run %s was made from a config with hash %.12s…, %s now has %.12s…; resume it with the config it ran with", ErrConfigChanged, rec.ID, rec.ConfigHash, o.Config.File, o.Config.Hash)
		}
		if todo, err = remaining(st, planned, o.RetryErrored); err != nil {
			return nil, err
		}
		rec.Resumes++
		rec.Collect = transcript.CollectRunning
		rec.Ended = time.Time{}
	} else {
		started := now().UTC()
		id := newRunID(o.Config.Name, started)
		if st, err = store.Create(o.Results, id); err != nil {
			return nil, err
		}
		st.Redact = o.Redact
		rec = transcript.Run{
			Kind: "mst.run", Version: transcript.RunVersion, ID: id, Eval: o.Config.Name,
			ConfigFile: o.Config.File, ConfigHash: o.Config.Hash, MSTVersion: o.MSTVersion,
			Started: started, Selection: o.Selection, Variants: o.Variants, Cases: len(o.Cases), Trials: o.Trials,
			Collect: transcript.CollectRunning,
		}
		if err := writeRunFiles(st, o); err != nil {
			return nil, err
		}
	}
	info := o.RunnerInfo
	info.Machines = rec.Runner.Machines
	rec.Runner = info
	rec.Counts.Planned = len(planned)
	if err := st.WriteJSON("run.json", rec); err != nil {
		return nil, err
	}

	col := &collector{st: st, graders: caseGraders, progress: o.Progress}
	if o.Progress != nil {
		o.Progress.Start(rec, len(todo))
	}
	limits := o.Config.Limits
	coord := &shard.Coordinator{
		MSTVersion: o.MSTVersion,
		Limits:     shard.NewLimiter(limits.Providers, limits.Servers),
		Events:     col,
		Logger:     o.Logger,
		Secrets:    o.Secrets,
	}
	bundles := split(rec, variants, o.Cases, todo, max(o.Shards, 1), concurrency(limits))
	attempt := rec.Resumes + 1
	machines := make([]transcript.Machine, len(bundles))
	var wg sync.WaitGroup
	for i, b := range bundles {
		wg.Go(func() {
			rep, err := o.Runner.RunShard(ctx, runner.Shard{Bundle: b, Results: st.Dir, Serve: coord.Serve})
			machines[i] = machineRecord(b, rep, err, ctx, attempt)
			if err != nil {
				o.Logger.Warn("shard ended badly", "shard", b.Shard, "err", err)
			}
		})
	}
	wg.Wait()
	if o.Progress != nil {
		o.Progress.Finish()
	}
	rec.Runner.Machines = append(rec.Runner.Machines, machines...)

	// Gather: the run folder is the truth, whatever this attempt did.
	gathered, err := gather(st, planned, caseGraders)
	if err != nil {
		return nil, err
	}
	rec.Ended = now().UTC()
	rec.Counts = gathered.counts
	rec.Collect = transcript.CollectComplete
	if rec.Counts.Missing > 0 || rec.Counts.Cancelled > 0 {
		rec.Collect = transcript.CollectPartial
	}
	var notes []string
	if ctx.Err() != nil {
		notes = append(notes, "interrupted")
	}
	var failed []string
	for _, m := range machines {
		if m.Error != "" {
			failed = append(failed, m.Error)
		}
	}
	notes = append(notes, failed...)
	rec.Note = strings.Join(notes, "; ")
	if err := st.WriteJSON("run.json", rec); err != nil {
		return nil, err
	}
	out := &Outcome{Store: st, Run: rec, Report: report.Build(reportInput(rec, o, gathered.trials))}
	if len(failed) > 0 && len(failed) == len(machines) && col.total() == 0 {
		return out, errors.New(strings.Join(failed, "\n"))
	}
	return out, nil
}

// plan lists every trial of the run, case by case, so a case's variants
// and trials run close together.
func plan(cases []dataset.Case, variants []string, trials int) []transcript.Key {
	var keys []transcript.Key
	for _, c := range cases {
		for _, v := range variants {
			for i := 1; i <= trials; i++ {
				keys = append(keys, transcript.Key{Case: c.ID, Variant: v, Trial: i})
			}
		}
	}
	return keys
}

// remaining returns the planned trials that have no valid transcript yet.
func remaining(st *store.Run, planned []transcript.Key, retryErrored bool) ([]transcript.Key, error) {
	done := map[transcript.Key]bool{}
	err := st.Transcripts(func(t *transcript.Transcript) error {
		switch t.Outcome.Status {
		case transcript.Cancelled:
		case transcript.Errored:
			done[t.Key] = !retryErrored
		default:
			done[t.Key] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var todo []transcript.Key
	for _, k := range planned {
		if !done[k] {
			todo = append(todo, k)
		}
	}
	return todo, nil
}

// split puts the trials into shards by case (shard.Assign), each bundle
// holding only its own cases. Empty shards are left out.
func split(rec transcript.Run, variants []shard.Variant, cases []dataset.Case, keys []transcript.Key, n, conc int) []*shard.Bundle {
	byCase := map[string]*dataset.Case{}
	for i := range cases {
		byCase[cases[i].ID] = &cases[i]
	}
	bundles := make([]*shard.Bundle, n)
	seen := make([]map[string]bool, n)
	for _, k := range keys {
		i := shard.Assign(k.Case, n)
		if bundles[i] == nil {
			bundles[i] = &shard.Bundle{Run: rec, Shard: i, Variants: variants, Concurrency: conc}
			seen[i] = map[string]bool{}
		}
		b := bundles[i]
		b.Trials = append(b.Trials, k)
		if !seen[i][k.Case] {
			seen[i][k.Case] = true
			b.Cases = append(b.Cases, *byCase[k.Case])
		}
	}
	var out []*shard.Bundle
	for _, b := range bundles {
		if b != nil {
			out = append(out, b)
		}
	}
	return out
}

func machineRecord(b *shard.Bundle, rep runner.ShardReport, err error, ctx context.Context, attempt int) transcript.Machine {
	m := transcript.Machine{Shard: b.Shard, ID: rep.Machine, Image: rep.Image, Trials: len(b.Trials), Attempt: attempt, Ended: "done"}
	if h := rep.Result.Hello; h != nil {
		m.MSTVersion, m.ClientVersions, m.OS = h.MSTVersion, h.ClientVersions, h.OS
	}
	if d := rep.Result.Done; d != nil {
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

func gradersByCase(global []json.RawMessage, cases []dataset.Case) (map[string][]grade.Grader, error) {
	graders, err := grade.ParseAll(global)
	if err != nil {
		return nil, fmt.Errorf("graders%w", err)
	}
	out := map[string][]grade.Grader{}
	for _, c := range cases {
		g, err := grade.ParseAll(c.Expect)
		if err != nil {
			return nil, fmt.Errorf("%s: case %q: expect%w", c.Source, c.ID, err)
		}
		out[c.ID] = append(append([]grade.Grader(nil), graders...), g...)
	}
	return out, nil
}

func concurrency(l eval.Limits) int {
	if l.Concurrency > 0 {
		return l.Concurrency
	}
	return 4
}

func writeRunFiles(st *store.Run, o Options) error {
	if b, err := os.ReadFile(o.Config.File); err == nil {
		if err := st.WriteFile("eval"+ext(o.Config.File), b); err != nil {
			return err
		}
	}
	if err := st.WriteCases(o.Cases); err != nil {
		return err
	}
	graders := o.Config.Graders
	if graders == nil {
		graders = []json.RawMessage{}
	}
	return st.WriteJSON("graders.json", graders)
}

func ext(path string) string {
	if strings.HasSuffix(path, ".json") {
		return ".json"
	}
	return ".yaml"
}

// resolveVariants turns the config's variants into what a worker needs.
func resolveVariants(o Options) ([]shard.Variant, error) {
	var out []shard.Variant
	for _, name := range o.Variants {
		v, ok := o.Config.Variants[name]
		if !ok {
			return nil, fmt.Errorf("unknown variant %q", name)
		}
		clientName := v.Client
		if clientName == "" {
			clientName = "api"
		}
		def, err := o.Clients.Lookup(clientName)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", name, err)
		}
		timeout := def.Timeout
		var opt struct {
			Timeout string `json:"timeout"`
		}
		if len(v.ClientOptions) > 0 {
			json.Unmarshal(v.ClientOptions, &opt)
		}
		if opt.Timeout != "" {
			d, err := time.ParseDuration(opt.Timeout)
			if err != nil {
				return nil, fmt.Errorf("variant %s: clientOptions.timeout: %q is not a duration (write 90s or 5m)", name, opt.Timeout)
			}
			timeout = d
		}
		names := v.Servers
		if len(names) == 0 {
			for n := range o.Config.Servers {
				names = append(names, n)
			}
			sort.Strings(names)
		}
		var list []servers.Server
		for _, n := range names {
			sc, ok := o.Config.Servers[n]
			if !ok {
				return nil, fmt.Errorf("variant %s: unknown server %q", name, n)
			}
			s := servers.Server{Name: n, Command: sc.Command, Args: sc.Args, Env: sc.Env, Dir: sc.Cwd, URL: sc.URL, Headers: sc.Headers, StartupTimeout: time.Duration(sc.StartupTimeout)}
			if over := v.Tools[n]; len(over) > 0 {
				s.Tools = map[string]servers.ToolOverride{}
				for tool, ov := range over {
					s.Tools[tool] = servers.ToolOverride{Description: ov.Description, Hidden: ov.Hidden}
				}
			}
			list = append(list, s)
		}
		out = append(out, shard.Variant{Name: name, Client: clientName, Model: v.Model, Options: v.ClientOptions, Servers: list, Timeout: timeout, Provider: shard.ProviderOf(v.Model)})
	}
	return out, nil
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

// collector follows trials as workers report them, for progress only: it
// grades each and keeps nothing, so memory stays flat.
type collector struct {
	st       *store.Run
	graders  map[string][]grade.Grader
	progress Progress

	mu sync.Mutex
	n  int
}

func (c *collector) Trial(shardIndex int, m *shard.Trial) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	if c.progress == nil {
		return
	}
	t, err := store.ReadTranscript(filepath.Join(c.st.Dir, filepath.FromSlash(m.Path)))
	if err != nil {
		return
	}
	_, rec := Summarize(t, c.graders[t.Case])
	c.progress.Trial(rec)
}

func (c *collector) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Summarize grades one transcript and reduces it to a report record.
func Summarize(t *transcript.Transcript, graders []grade.Grader) (grade.TrialGrade, report.Trial) {
	g := grade.Trial(t, graders)
	return g, report.Trial{
		Key: t.Key, Status: t.Outcome.Status, Cause: t.Outcome.Cause,
		Graded: g.Graded, Passed: g.Passed,
		InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens,
		DurationMs: t.Timing.DurationMs, ToolCalls: len(t.ToolCalls),
	}
}

type gathered struct {
	counts transcript.Counts
	trials []report.Trial
}

// gather reads every transcript of the run folder once: it grades each,
// streams the grades to grades.json, and keeps the small record the report
// needs. Transcripts of trials the run did not plan are ignored.
func gather(st *store.Run, planned []transcript.Key, graders map[string][]grade.Grader) (gathered, error) {
	want := make(map[transcript.Key]bool, len(planned))
	for _, k := range planned {
		want[k] = true
	}
	var g gathered
	g.counts.Planned = len(planned)
	err := st.WriteStream("grades.json", func(w io.Writer) error {
		io.WriteString(w, `{"kind":"mst.grades","version":1,"trials":[`)
		first := true
		err := st.Transcripts(func(t *transcript.Transcript) error {
			if !want[t.Key] {
				return nil
			}
			tg, rec := Summarize(t, graders[t.Case])
			g.counts.Add(t.Outcome.Status)
			g.trials = append(g.trials, rec)
			b, err := json.Marshal(tg)
			if err != nil {
				return err
			}
			if !first {
				io.WriteString(w, ",\n")
			}
			first = false
			_, err = w.Write(b)
			return err
		})
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, "]}\n")
		return err
	})
	g.counts.Missing = g.counts.Planned - g.counts.Done()
	sort.Slice(g.trials, func(i, j int) bool { return keyLess(g.trials[i].Key, g.trials[j].Key) })
	return g, err
}

func reportInput(rec transcript.Run, o Options, trials []report.Trial) report.Input {
	in := report.Input{Run: rec, Trials: trials}
	for _, name := range o.Variants {
		v := o.Config.Variants[name]
		cl := v.Client
		if cl == "" {
			cl = "api"
		}
		in.Variants = append(in.Variants, report.VariantInfo{Name: name, Client: cl, Model: v.Model, Description: v.Description})
	}
	for _, cs := range o.Cases {
		in.Cases = append(in.Cases, cs.ID)
	}
	return in
}

// Grades is grades.json.
type Grades struct {
	Kind    string             `json:"kind"`
	Version int                `json:"version"`
	Trials  []grade.TrialGrade `json:"trials"`
}

func keyLess(a, b transcript.Key) bool {
	if a.Variant != b.Variant {
		return a.Variant < b.Variant
	}
	if a.Case != b.Case {
		return a.Case < b.Case
	}
	return a.Trial < b.Trial
}
