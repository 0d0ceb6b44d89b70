package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// ErrConfigChanged means a run cannot be resumed with this config.
var ErrConfigChanged = errors.New("the eval config changed since the run")

// ErrInvalid marks an error in what the user gave (a config, a dataset, a
// selection) as opposed to one met while running; the CLI exits 2 on it.
var ErrInvalid = errors.New("invalid")

// invalid wraps err as ErrInvalid, keeping its message.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return &invalidError{err}
}

type invalidError struct{ err error }

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() []error      { return []error{e.err, ErrInvalid} }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Request is what a plan is made from: what `mst run` or `mst validate` was
// given, and the registries of this build.
type Request struct {
	// ConfigFile is the eval config; with Resume it may be empty, and the
	// run's own config file is used.
	ConfigFile string
	// Selection narrows a new run: variants, cases, trials per case, limit.
	Selection transcript.Selection
	// Results is the --results folder, "" for the config's.
	Results string
	// Resume is the stored run to finish, nil for a new run; RetryErrored
	// runs its errored trials again too.
	Resume       store.Run
	RetryErrored bool
	// OS is the GOOS of the machines that run the trials, "" when the
	// runner does not say (then clients' OS requirements are not checked);
	// ThisMachine says they are this machine, so clients' preflight checks
	// (an installed CLI) run.
	OS          string
	ThisMachine bool

	Clients   *client.Registry
	Providers *provider.Registry
	// Graders are the graders plugins add; nil means those ctx carries
	// (grade.RegistryFrom). Sources are the dataset sources plugins add,
	// and PluginVersions gives the version of this mst's plugin of a
	// namespace (for the eval's plugins list).
	Graders        *grade.Registry
	Sources        *dataset.Sources
	PluginVersions func(namespace string) (string, bool)
	// Secrets holds the secrets file's values. The plan adds to it the key
	// variables its clients read, from Env (MST's own environment), where
	// the file does not set them.
	Secrets *secrets.Set
	Env     map[string]string
	// NotSent is the launching environment of a detached run (mst run
	// --detach): nothing of it goes to the coordinator machine, so no key
	// is taken from it, but an error about a key it sets says so.
	NotSent map[string]string
	// SourceEnv, when not nil, is where dataset sources find the
	// credentials the secrets file does not set, in place of Env (mst
	// validate checks no key in Env without a secrets file, but a source
	// still needs its credentials to load).
	SourceEnv map[string]string
	// SecretsFile is the secrets file's path ("" for none), named in the
	// error about a key that neither it nor Env sets.
	SecretsFile string
	// NoGrade collects without grading (mst run --no-grade): judges need
	// no key then. A resumed run keeps how it was started.
	NoGrade bool
	// Datasets, when not nil, are the config's datasets as another machine
	// loaded them (mst run --loaded-datasets, on a detached run's
	// coordinator): the dataset files are not read.
	Datasets []dataset.Loaded
	// ConfigDir, when set, is the folder the config's relative paths start
	// from, and ConfigOrigin the config file's path to record in run.json,
	// both as on the launching machine (eval.LoadOptions.Dir).
	ConfigDir, ConfigOrigin string
}

// Plan is one run decided: which trials, and every setting each runs
// with. It is made once, by NewPlan, and read by everything after: the
// coordinator, the bundles, the report. Nothing downstream applies a
// default or reads an option again.
type Plan struct {
	Config *eval.Config
	// Cases are the cases to run, in dataset order.
	Cases []dataset.Case
	// Variants are the variant names to run, in display order.
	Variants []string
	// Trials per case and variant.
	Trials    int
	Selection transcript.Selection
	// Results is the folder that holds runs.
	Results string
	// ConfigOrigin is the config's path as recorded in run.json when it
	// is not Config.File (Request.ConfigOrigin).
	ConfigOrigin string
	// Settings are the fixed settings trials run with: one per variant
	// (in Variants order), then one per case that overrides the model or
	// options of a variant.
	Settings []shard.Setting
	// KeyVars are the environment variables the run's clients read keys
	// from; those set are in the request's Secrets.
	KeyVars []string

	// Resume is the stored run being finished, with what it still needs.
	Resume *Resumed
	// Loaded are the datasets as this machine loaded them (nil when they
	// came loaded, Request.Datasets): what a detached run ships, so that
	// no other machine reads a dataset file or runs a dataset source.
	Loaded []dataset.Loaded

	graders  map[string][]grade.Grader // by case id: the eval's, then the case's
	gradeReg *grade.Registry
	// sourceCreds are the variables the dataset sources read: never sent
	// to a worker (workerSecrets).
	sourceCreds []string
	settingOf   map[settingKey]int
	// NoGrade says the run collects only (--no-grade, or a resumed run
	// that was started so).
	NoGrade bool
	// judges reach the judges' models (nil when no grader is a judge);
	// judgeKeys are the variables their keys come from (grading.go).
	judges    *grade.Judges
	judgeKeys []string
}

// Resumed is what a resumed run still has to do.
type Resumed struct {
	Store  store.Run
	Record transcript.Run
	// Todo are the trials without a valid transcript: missing and
	// cancelled ones, and errored ones too with RetryErrored; in plan
	// order, as series (Plan.Series).
	Todo []shard.Series
	// Replace holds the trials of Todo that have a transcript to replace.
	Replace map[transcript.Key]bool
}

type settingKey struct{ variant, caseID string }

// Setting returns the setting the trial of key runs with.
func (p *Plan) Setting(key transcript.Key) (int, *shard.Setting) {
	i := p.settingIndex(key)
	return i, &p.Settings[i]
}

// settingIndex is the place in Settings of the trial's setting.
func (p *Plan) settingIndex(key transcript.Key) int {
	i, ok := p.settingOf[settingKey{key.Variant, key.Case}]
	if !ok {
		i = p.settingOf[settingKey{key.Variant, ""}]
	}
	return i
}

// Graders returns the graders of a case: the eval's, then the case's own.
func (p *Plan) Graders(caseID string) []grade.Grader { return p.graders[caseID] }

// Size is the number of trials the run plans: its cases × variants ×
// trials.
func (p *Plan) Size() int { return len(p.Cases) * len(p.Variants) * p.Trials }

// AllKeys yields every trial the run plans, case by case, so a case's
// variants and trials run close together.
func (p *Plan) AllKeys() iter.Seq[transcript.Key] {
	return func(yield func(transcript.Key) bool) {
		for pt := range shard.AllTrials(p.Series()) {
			if !yield(pt.Key) {
				return
			}
		}
	}
}

// Keys lists every trial the run plans (AllKeys): a list as long as the
// run, for small plans and tests.
func (p *Plan) Keys() []transcript.Key { return slices.Collect(p.AllKeys()) }

// Series is every trial the run plans, in AllKeys' order, as one series
// per case and variant: what a plan holds does not grow with its trials.
func (p *Plan) Series() []shard.Series {
	out := make([]shard.Series, 0, len(p.Cases)*len(p.Variants))
	if p.Trials < 1 {
		return out
	}
	for _, c := range p.Cases {
		for _, v := range p.Variants {
			si := p.settingIndex(transcript.Key{Case: c.ID, Variant: v})
			out = append(out, shard.Series{Case: c.ID, Variant: v, Setting: si, First: 1, Count: p.Trials})
		}
	}
	return out
}

// todo is the trials this attempt runs, as series: every planned one, or
// what a resumed run still needs.
func (p *Plan) todo() []shard.Series {
	if p.Resume != nil {
		return p.Resume.Todo
	}
	return p.Series()
}

// Todo lists the trials this attempt runs: a list as long as the run,
// for small plans and tests.
func (p *Plan) Todo() []transcript.Key {
	var out []transcript.Key
	for pt := range shard.AllTrials(p.todo()) {
		out = append(out, pt.Key)
	}
	return out
}

// NewPlan loads the eval, its datasets and graders, applies the selection
// (or the stored run's own plan when resuming), checks that every variant
// can run where the trials run, and resolves every trial's setting. Errors
// in what the user gave wrap ErrInvalid.
func NewPlan(ctx context.Context, req Request) (*Plan, error) {
	var stored transcript.Run
	path := req.ConfigFile
	if req.Resume != nil {
		s := req.Selection
		if len(s.Variants) > 0 || len(s.Cases) > 0 || s.Trials > 0 || s.Limit > 0 {
			return nil, invalid(errors.New("--resume runs the run's own plan: drop --variant, --case, --trials and --limit"))
		}
		var err error
		if stored, err = req.Resume.ReadRun(ctx); err != nil {
			return nil, err
		}
		// A run still written by a live process is its own: resuming it
		// would run its trials twice and swap its transcripts.
		if o, live, err := req.Resume.Holder(ctx); err != nil {
			return nil, err
		} else if live {
			return nil, &store.BusyError{Location: req.Resume.Location(), Owner: o}
		}
		if path == "" {
			path = stored.ConfigFile
			if stored.ConfigPath != "" {
				path = stored.ConfigPath
			}
		}
	} else if req.RetryErrored {
		return nil, invalid(errors.New("--retry-errored goes with --resume RUN"))
	}
	cat := Catalog{Clients: req.Clients, Providers: req.Providers, Graders: req.Graders, Sources: req.Sources, PluginVersions: req.PluginVersions}
	cfg, err := eval.LoadWith(path, cat,
		eval.LoadOptions{Dir: req.ConfigDir, DatasetsLoaded: req.Datasets != nil})
	if err != nil {
		return nil, invalid(err)
	}
	var paths []string
	for _, d := range DatasetSpecs(cfg) {
		paths = append(paths, d.Origin())
	}
	var cases []dataset.Case
	var loaded []dataset.Loaded
	if req.Datasets != nil {
		cases, err = loadedCases(paths, req.Datasets)
	} else {
		loaded, err = dataset.LoadSpecs(ctx, DatasetSpecs(cfg), req.Sources, sourceEnv(req))
		for _, l := range loaded {
			cases = append(cases, l.Cases...)
		}
	}
	if err != nil {
		return nil, invalid(err)
	}
	p := &Plan{Config: cfg, Selection: req.Selection, ConfigOrigin: req.ConfigOrigin, gradeReg: req.Graders, Loaded: loaded}
	for _, d := range cfg.Datasets {
		if def, err := req.Sources.Lookup(d.Source); d.Source != "" && err == nil {
			p.sourceCreds = append(p.sourceCreds, def.Credentials...)
		}
	}
	if req.Resume != nil {
		if stored.ConfigHash != cfg.Hash {
			return nil, invalid(fmt.Errorf("%w: run %s was made from a config with hash %.12s…, %s now has %.12s…; resume it with the config it ran with", ErrConfigChanged, stored.ID, stored.ConfigHash, cfg.File, cfg.Hash))
		}
		// A resumed run keeps its own plan: the cases as they were loaded,
		// its variants and its trials per case.
		if cases, err = req.Resume.ReadCases(ctx); err != nil {
			return nil, fmt.Errorf("reading the run's cases: %w", err)
		}
		for _, v := range stored.Variants {
			if _, ok := cfg.Variants[v]; !ok {
				return nil, invalid(fmt.Errorf("%w: variant %s is gone from %s", ErrConfigChanged, v, path))
			}
		}
		p.Variants, p.Trials, p.Cases, p.Selection = stored.Variants, stored.Trials, cases, stored.Selection
	} else if err := p.selectTrials(cases); err != nil {
		return nil, invalid(err)
	}
	p.Results = req.Results
	if p.Results == "" {
		p.Results = cfg.Results
	}
	if err := p.parseGraders(); err != nil {
		return nil, invalid(err)
	}
	// Only the variants that run are checked: a run of --variant offline
	// needs no other variant's CLI, nor its support of a case's overrides.
	checked := *cfg
	checked.VariantOrder = p.Variants
	if err := Check(&checked, p.Cases, req.Clients, req.OS, req.ThisMachine); err != nil {
		return nil, invalid(err)
	}
	// The folders and programs of the servers that run are checked when
	// they would be on this machine; other runners' servers start on
	// their machines, which check them there.
	if req.ThisMachine {
		used := checked
		used.Servers = map[string]eval.ServerConfig{}
		for _, v := range p.Variants {
			for _, s := range cfg.Variants[v].Servers {
				used.Servers[s] = cfg.Servers[s]
			}
		}
		if errs := eval.CheckFiles(&used); len(errs) > 0 {
			return nil, invalid(errs)
		}
	}
	if err := p.resolveSettings(req.Clients); err != nil {
		return nil, invalid(err)
	}
	if err := p.resolveKeys(req); err != nil {
		return nil, invalid(err)
	}
	if err := p.checkServerSecrets(req.Secrets, req.SecretsFile); err != nil { // run/serversecrets.go
		return nil, invalid(err)
	}
	if err := p.resolveGraders(req.Secrets); err != nil { // run/refs.go
		return nil, invalid(err)
	}
	p.NoGrade = req.NoGrade || (req.Resume != nil && stored.NoGrade)
	if err := p.resolveJudges(req, p.NoGrade); err != nil { // run/grading.go
		return nil, invalid(err)
	}
	if req.Resume != nil {
		r := &Resumed{Store: req.Resume, Record: stored, Replace: map[transcript.Key]bool{}}
		if err := r.remaining(ctx, p.Series(), req.RetryErrored); err != nil {
			return nil, err
		}
		p.Resume = r
	}
	return p, nil
}

// selectTrials applies the selection to a new run.
func (p *Plan) selectTrials(cases []dataset.Case) error {
	s, cfg := p.Selection, p.Config
	if s.Trials < 0 || s.Limit < 0 {
		return errors.New("--trials and --limit take a positive number")
	}
	cases, err := dataset.Select(cases, s.Cases, s.Limit)
	if err != nil {
		return err
	}
	variants := cfg.VariantOrder
	if len(s.Variants) > 0 {
		for _, v := range s.Variants {
			if _, ok := cfg.Variants[v]; !ok {
				return fmt.Errorf("--variant %s: no such variant in %s (it has: %s)", v, cfg.File, strings.Join(cfg.VariantOrder, ", "))
			}
		}
		variants = slices.DeleteFunc(slices.Clone(cfg.VariantOrder), func(v string) bool { return !slices.Contains(s.Variants, v) })
	}
	p.Cases, p.Variants, p.Trials = cases, variants, cfg.Trials
	if s.Trials > 0 {
		p.Trials = s.Trials
	}
	return nil
}

// parseGraders parses the eval's graders and each case's once; every bad
// case is reported.
func (p *Plan) parseGraders() error {
	global, err := grade.ParseAllIn(p.gradeReg, p.Config.Graders)
	if err != nil {
		return fmt.Errorf("%s: graders%w", p.Config.File, err)
	}
	p.graders = make(map[string][]grade.Grader, len(p.Cases))
	var bad []error
	for _, c := range p.Cases {
		own, err := grade.ParseAllIn(p.gradeReg, c.Expect)
		if err != nil {
			bad = append(bad, fmt.Errorf("%s: case %q: expect%w", c.Source, c.ID, err))
			continue
		}
		p.graders[c.ID] = append(slices.Clip(global), own...)
	}
	return errors.Join(bad...)
}

// resolveSettings makes the settings: one per variant, one per case that
// overrides a variant's model or options.
func (p *Plan) resolveSettings(clients *client.Registry) error {
	p.settingOf = map[settingKey]int{}
	base := make(map[string]shard.Setting, len(p.Variants))
	defs := make(map[string]*client.Definition, len(p.Variants))
	for _, name := range p.Variants {
		v := p.Config.Variants[name]
		def, err := clients.Lookup(v.Client)
		if err != nil {
			return fmt.Errorf("%s: variants.%s.client: %w", p.Config.File, name, err)
		}
		// eval.Load has checked the variant against its client
		// (eval.ClientCatalog): what only MST's proxy offers (connector
		// servers, tool rewrites, dry runs, faults, call caps) is asked
		// only of a client that takes the proxy, and the variant's own
		// timeout and apiKeyEnv lift out.
		var list []servers.Server
		for _, n := range v.Servers {
			sc := p.Config.Servers[n]
			s := eval.ServerOf(n, sc, v)
			if sc.OAuth != nil {
				s.OAuth = &servers.OAuth{Token: p.ConnectorTokens()[n]}
			}
			list = append(list, s)
		}
		set := shard.Setting{Variant: name, Client: v.Client, Model: v.Model, Provider: provider.Of(v.Model), Timeout: clientTimeout(def), Servers: list}
		for _, n := range v.Servers {
			if c, ok := p.Config.Limits.ServerCalls[n]; ok {
				if set.CallLimits == nil {
					set.CallLimits = map[string]int{}
				}
				set.CallLimits[n] = c
			}
		}
		own, err := eval.LiftOwnOptions(v.ClientOptions)
		if err != nil {
			return fmt.Errorf("%s: variants.%s.clientOptions.%w", p.Config.File, name, err)
		}
		applyOwn(own, &set)
		base[name], defs[name] = set, def
		p.settingOf[settingKey{name, ""}] = len(p.Settings)
		p.Settings = append(p.Settings, set)
	}
	for _, c := range p.Cases {
		if c.Model == "" && len(c.ClientOptions) == 0 {
			continue
		}
		for _, name := range p.Variants {
			set := base[name]
			set.Servers = slices.Clone(set.Servers)
			if c.Model != "" && c.Model != set.Model {
				set.Model, set.Provider = c.Model, provider.Of(c.Model)
			}
			if len(c.ClientOptions) > 0 {
				merged, err := mergeOptions(p.Config.Variants[name].ClientOptions, c.ClientOptions)
				if err != nil {
					return fmt.Errorf("%s: case %q: clientOptions: %w", c.Source, c.ID, err)
				}
				own, err := eval.LiftOwnOptions(merged)
				if err != nil {
					return fmt.Errorf("%s: case %q: clientOptions.%w", c.Source, c.ID, err)
				}
				// The merged options hold the variant's own keys too.
				set.Timeout, set.KeyEnv = clientTimeout(defs[name]), ""
				applyOwn(own, &set)
			}
			p.settingOf[settingKey{name, c.ID}] = len(p.Settings)
			p.Settings = append(p.Settings, set)
		}
	}
	return nil
}

// FallbackTimeout is the trial timeout of a client whose definition gives
// none (a client from outside MST): no trial runs without a deadline.
const FallbackTimeout = 10 * time.Minute

// clientTimeout is the trial timeout a client's trials get when neither the
// variant nor the case sets clientOptions.timeout.
func clientTimeout(def *client.Definition) time.Duration {
	if def.Timeout > 0 {
		return def.Timeout
	}
	return FallbackTimeout
}

// applyOwn puts MST's own client options, lifted out of the rest
// (eval.LiftOwnOptions), into a setting.
func applyOwn(o eval.OwnOptions, s *shard.Setting) {
	s.Options = o.Rest
	if o.Timeout != nil {
		s.Timeout = *o.Timeout
	}
	if o.KeyEnv != "" {
		s.KeyEnv = o.KeyEnv
	}
}

// mergeOptions lays a case's client options over a variant's: the keys of
// over replace those of base.
func mergeOptions(base, over json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	for _, raw := range []json.RawMessage{base, over} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var part map[string]json.RawMessage
		if err := json.Unmarshal(raw, &part); err != nil {
			return nil, err
		}
		for k, v := range part {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// resolveKeys lists the key variables the run's clients read, and adds
// those set in MST's environment to the secrets (the secrets file wins).
// Like the file's values, they are redacted from everything stored.
func (p *Plan) resolveKeys(req Request) error {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, set := range p.Settings {
		def, err := req.Clients.Lookup(set.Client)
		if err != nil {
			return err
		}
		for _, n := range def.KeyVars {
			add(n)
		}
		if def.ProviderKeys {
			if set.KeyEnv != "" {
				add(set.KeyEnv)
			} else if req.Providers != nil {
				if pd, err := req.Providers.Lookup(set.Provider); err == nil {
					add(pd.KeyVar)
				}
			}
		}
	}
	p.KeyVars = names
	if req.Secrets == nil {
		return nil
	}
	for _, name := range names {
		value := req.Env[name]
		if value == "" {
			continue
		}
		if _, inFile := req.Secrets.Get(name); inFile {
			continue
		}
		if err := req.Secrets.Add(name, value); err != nil {
			return fmt.Errorf("environment variable %s: %w", name, err)
		}
	}
	return p.checkKeys(req)
}

// checkKeys fails the plan, before anything opens, when a variant's model
// needs its provider's key and neither MST's environment nor the secrets
// file sets it: every trial of that variant would error. One line per
// variant and variable.
func (p *Plan) checkKeys(req Request) error {
	if req.Providers == nil {
		return nil
	}
	var errs []error
	seen := map[string]bool{}
	for _, set := range p.Settings {
		def, err := req.Clients.Lookup(set.Client)
		if err != nil || !def.ProviderKeys {
			continue
		}
		pd, err := req.Providers.Lookup(set.Provider)
		if err != nil || !pd.KeyRequired(baseURL(set.Options)) {
			continue
		}
		name, how := pd.KeyVar, "set it in one of them, or name another variable with clientOptions.apiKeyEnv"
		if set.KeyEnv != "" {
			name, how = set.KeyEnv, "set it in one of them (clientOptions.apiKeyEnv names it)"
		}
		if pd.KeyOptionalWithBaseURL {
			how += ", or point clientOptions.baseURL at a server that needs no key"
		}
		if _, ok := req.Secrets.Get(name); ok {
			continue
		}
		if seen[set.Variant+"\x00"+name] {
			continue
		}
		seen[set.Variant+"\x00"+name] = true
		if req.NotSent[name] != "" {
			errs = append(errs, fmt.Errorf("%s: variants.%s: model %s reads its API key from %s: %s", p.Config.File, set.Variant, set.Model, name, notSent(name, req.SecretsFile)))
			continue
		}
		where := "MST's environment does not set it, and no --secrets-file was given"
		if req.SecretsFile != "" {
			where = fmt.Sprintf("neither MST's environment nor the secrets file %s sets it", req.SecretsFile)
		}
		errs = append(errs, fmt.Errorf("%s: variants.%s: model %s reads its API key from %s, but %s: %s",
			p.Config.File, set.Variant, set.Model, name, where, how))
	}
	return errors.Join(errs...)
}

// notSent says what to do about a key that is set only in the shell that
// launches a detached run.
func notSent(name, secretsFile string) string {
	if secretsFile == "" {
		return fmt.Sprintf("this shell sets it, but a detached run (--detach) takes nothing of this machine's environment to its coordinator machine, only a secrets file: put a line %s=... in a file (mode 600) and give it with --secrets-file FILE", name)
	}
	return fmt.Sprintf("this shell sets it, but a detached run (--detach) takes nothing of this machine's environment to its coordinator machine, only the secrets file: add a line %s=... to %s", name, secretsFile)
}

// baseURL is clientOptions.baseURL of a client that reads its provider's
// key (client.Definition.ProviderKeys): the provider's address, "" for its
// public one.
func baseURL(options json.RawMessage) string {
	var o struct {
		BaseURL string `json:"baseURL"`
	}
	if len(options) > 0 {
		json.Unmarshal(options, &o) // the schema checked the options
	}
	return o.BaseURL
}

// remaining finds the planned trials without a valid transcript.
func (r *Resumed) remaining(ctx context.Context, planned []shard.Series, retryErrored bool) error {
	status := map[transcript.Key]string{}
	err := r.Store.Grades(ctx, func(g grade.TrialGrade) error {
		status[g.Key] = g.Trial.Status
		return nil
	})
	if err != nil {
		return err
	}
	keys, err := r.Store.Keys(ctx)
	if err != nil {
		return err
	}
	have := map[transcript.Key]bool{}
	for _, k := range keys {
		st, graded := status[k]
		if !graded || st == "" {
			// (A superseded grade has no status either.)
			// No grade says how it ended (a crash before grading, or a
			// run from before grades held it): read the transcript.
			t, err := r.Store.ReadTranscript(ctx, k)
			if errors.Is(err, store.ErrNotFound) {
				continue // cut short by a crash: the trial is missing
			}
			if err != nil {
				return err
			}
			st = t.Outcome.Status
		}
		status[k] = st
		have[k] = true
	}
	for pt := range shard.AllTrials(planned) {
		k := pt.Key
		if !have[k] {
			if _, graded := status[k]; graded {
				// A grade of a transcript that is gone (or cut short):
				// mark it superseded before the trial runs again, so it
				// cannot pass for the new transcript's.
				r.Replace[k] = true
			}
			pt.Replace = r.Replace[k]
			r.Todo = shard.AppendTrial(r.Todo, pt)
			continue
		}
		switch status[k] {
		case transcript.Cancelled, transcript.Skipped:
		case transcript.Errored:
			if !retryErrored {
				continue
			}
		default:
			continue
		}
		r.Replace[k] = true
		pt.Replace = true
		r.Todo = shard.AppendTrial(r.Todo, pt)
	}
	return nil
}

// ConnectorTokens maps each connector server of the config (one with
// oauth) to the name its access token travels under
// (servers.TokenNames).
func (p *Plan) ConnectorTokens() map[string]string {
	var names []string
	for _, n := range slices.Sorted(maps.Keys(p.Config.Servers)) {
		if p.Config.Servers[n].OAuth != nil {
			names = append(names, n)
		}
	}
	return servers.TokenNames(names)
}

// UsedConnectors lists, sorted, the connector servers the plan's variants
// use.
func (p *Plan) UsedConnectors() []string {
	seen := map[string]bool{}
	for _, name := range p.Variants {
		for _, n := range p.Config.Variants[name].Servers {
			if p.Config.Servers[n].OAuth != nil {
				seen[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// loadedCases are the cases of the datasets at paths (the config's, in
// its order), taken from datasets loaded elsewhere: each path must have
// been loaded, and nothing else.
func loadedCases(paths []string, loaded []dataset.Loaded) ([]dataset.Case, error) {
	by := map[string][]dataset.Case{}
	for _, d := range loaded {
		by[d.Origin] = d.Cases
	}
	var cases []dataset.Case
	for _, p := range paths {
		cs, ok := by[p]
		if !ok {
			return nil, fmt.Errorf("the loaded datasets hold no dataset %s, which the config lists: launch the run again from the machine that has the config", p)
		}
		cases = append(cases, cs...)
		delete(by, p)
	}
	for origin := range by {
		return nil, fmt.Errorf("the loaded datasets hold %s, which the config does not list: launch the run again from the machine that has the config", origin)
	}
	return cases, nil
}
