// Package run carries out `mst run`: it plans an eval's trials, makes the
// run folder, runs the shards through a runner under one coordinator,
// grades each trial as it arrives, and gathers the run into run.json.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/client/api"
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
	// Env holds the values clients may read (API keys).
	Env map[string]string
	// Redact removes secret values from every file of the run folder the
	// coordinator writes; nil removes nothing. The runner redacts what its
	// workers write.
	Redact     *secrets.Redactor
	Progress   Progress
	Logger     *slog.Logger
	MSTVersion string
	// Runner runs the shards; nil means local.
	Runner runner.Runner
	// Now returns the current time (tests pin it); nil means time.Now.
	Now func() time.Time
}

// Outcome is what a run produced.
type Outcome struct {
	Store  *store.Run
	Run    transcript.Run
	Report report.Report
}

// Execute runs the eval. It returns the run even when it is partial (Ctrl-C,
// a lost shard); the error says why a run could not finish.
func Execute(ctx context.Context, o Options) (*Outcome, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	variants, err := resolveVariants(o)
	if err != nil {
		return nil, err
	}
	graders, err := grade.ParseAll(o.Config.Graders)
	if err != nil {
		return nil, fmt.Errorf("%s: graders%w", o.Config.File, err)
	}
	caseGraders := map[string][]grade.Grader{}
	for _, c := range o.Cases {
		g, err := grade.ParseAll(c.Expect)
		if err != nil {
			return nil, fmt.Errorf("%s: case %q: expect%w", c.Source, c.ID, err)
		}
		caseGraders[c.ID] = append(append([]grade.Grader(nil), graders...), g...)
	}

	started := now().UTC()
	id := newRunID(o.Config.Name, started)
	st, err := store.Create(o.Results, id)
	if err != nil {
		return nil, err
	}
	st.Redact = o.Redact
	var keys []transcript.Key
	for _, c := range o.Cases {
		for _, v := range o.Variants {
			for i := 1; i <= o.Trials; i++ {
				keys = append(keys, transcript.Key{Case: c.ID, Variant: v, Trial: i})
			}
		}
	}
	rn := o.Runner
	if rn == nil {
		return nil, fmt.Errorf("no runner")
	}
	rec := transcript.Run{
		Kind: "mst.run", Version: transcript.RunVersion, ID: id, Eval: o.Config.Name,
		ConfigFile: o.Config.File, ConfigHash: o.Config.Hash, MSTVersion: o.MSTVersion,
		Started: started, Runner: transcript.RunnerInfo{Name: rn.Name(), Shards: 1},
		Selection: o.Selection, Variants: o.Variants, Cases: len(o.Cases), Trials: o.Trials,
		Counts: transcript.Counts{Planned: len(keys)}, Collect: transcript.CollectRunning,
	}
	if err := writeRunFiles(st, o, rec); err != nil {
		return nil, err
	}

	col := &collector{st: st, graders: caseGraders, progress: o.Progress, records: map[transcript.Key]report.Trial{}, grades: map[transcript.Key]grade.TrialGrade{}}
	if o.Progress != nil {
		o.Progress.Start(rec, len(keys))
	}
	limits := o.Config.Limits
	coord := &shard.Coordinator{
		MSTVersion: o.MSTVersion,
		Limits:     shard.NewLimiter(limits.Providers, limits.Servers),
		Events:     col,
		Logger:     o.Logger,
	}
	bundle := &shard.Bundle{Run: rec, Shard: 0, Variants: variants, Cases: o.Cases, Trials: keys, Concurrency: concurrency(limits)}
	_, shardErr := rn.RunShard(ctx, bundle, st.Dir, coord.Serve)
	if o.Progress != nil {
		o.Progress.Finish()
	}

	rec.Ended = now().UTC()
	rec.Counts = col.counts(len(keys))
	rec.Collect = transcript.CollectComplete
	var notes []string
	if rec.Counts.Missing > 0 || rec.Counts.Cancelled > 0 {
		rec.Collect = transcript.CollectPartial
	}
	if ctx.Err() != nil {
		notes = append(notes, "interrupted")
	}
	if shardErr != nil {
		notes = append(notes, shardErr.Error())
	}
	rec.Note = strings.Join(notes, "; ")
	if err := col.writeGrades(); err != nil {
		return nil, err
	}
	if err := st.WriteJSON("run.json", rec); err != nil {
		return nil, err
	}
	out := &Outcome{Store: st, Run: rec, Report: report.Build(col.reportInput(rec, o))}
	if shardErr != nil && col.total() == 0 {
		return out, shardErr
	}
	return out, nil
}

func concurrency(l eval.Limits) int {
	if l.Concurrency > 0 {
		return l.Concurrency
	}
	return 4
}

func writeRunFiles(st *store.Run, o Options, rec transcript.Run) error {
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
	if err := st.WriteJSON("graders.json", graders); err != nil {
		return err
	}
	return st.WriteJSON("run.json", rec)
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
		timeout := def.DefaultTimeout()
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
		provider := ""
		if clientName == "api" {
			provider = api.ProviderOf(v.Model)
		}
		out = append(out, shard.Variant{Name: name, Client: clientName, Model: v.Model, Options: v.ClientOptions, Servers: list, Timeout: timeout, Provider: provider})
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

// collector grades each trial as its report arrives and keeps the small
// per-trial records the report needs.
type collector struct {
	st       *store.Run
	graders  map[string][]grade.Grader
	progress Progress

	mu      sync.Mutex
	records map[transcript.Key]report.Trial
	grades  map[transcript.Key]grade.TrialGrade
}

func (c *collector) Trial(shardIndex int, m *shard.Trial) {
	t, err := store.ReadTranscript(c.st.Dir + "/" + m.Path)
	if err != nil {
		return
	}
	g, rec := Summarize(t, c.graders[t.Case])
	c.mu.Lock()
	c.records[t.Key] = rec
	c.grades[t.Key] = g
	c.mu.Unlock()
	if c.progress != nil {
		c.progress.Trial(rec)
	}
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

func (c *collector) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.records)
}

func (c *collector) counts(planned int) transcript.Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := transcript.Counts{Planned: planned}
	for _, r := range c.records {
		n.Add(r.Status)
	}
	n.Missing = planned - n.Done()
	return n
}

func (c *collector) writeGrades() error {
	c.mu.Lock()
	list := make([]grade.TrialGrade, 0, len(c.grades))
	for _, g := range c.grades {
		list = append(list, g)
	}
	c.mu.Unlock()
	sortGrades(list)
	// Written one grade at a time: a run of many trials never holds the
	// whole file in memory.
	return c.st.WriteStream("grades.json", func(w io.Writer) error {
		io.WriteString(w, `{"kind":"mst.grades","version":1,"trials":[`)
		for i, g := range list {
			if i > 0 {
				io.WriteString(w, ",")
			}
			b, err := json.Marshal(g)
			if err != nil {
				return err
			}
			w.Write(b)
		}
		_, err := io.WriteString(w, "]}\n")
		return err
	})
}

func (c *collector) reportInput(rec transcript.Run, o Options) report.Input {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := report.Input{Run: rec}
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
	for _, r := range c.records {
		in.Trials = append(in.Trials, r)
	}
	sort.Slice(in.Trials, func(i, j int) bool { return keyLess(in.Trials[i].Key, in.Trials[j].Key) })
	return in
}

// Grades is grades.json.
type Grades struct {
	Kind    string             `json:"kind"`
	Version int                `json:"version"`
	Trials  []grade.TrialGrade `json:"trials"`
}

func sortGrades(list []grade.TrialGrade) {
	sort.Slice(list, func(i, j int) bool { return keyLess(list[i].Key, list[j].Key) })
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
