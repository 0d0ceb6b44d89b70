package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// BundleFormat is the version of the bundle this MST writes and reads. A
// worker runs the coordinator's own MST (hello refuses any other), so a
// bundle of another format is refused as such.
const BundleFormat = 4

// bundleFile is the bundle's file in a bundle folder.
const bundleFile = "bundle.json"

// Work kinds: what a shard does (Bundle.Work).
const (
	// WorkCollect runs trials (mst collect): the default.
	WorkCollect = "collect"
	// WorkGrade grades stored transcripts (mst grade-shard).
	WorkGrade = "grade"
)

// Bundle is everything a worker needs to run one shard, resolved by the
// coordinator's plan: the worker never loads a dataset or a config, and
// never resolves a setting itself.
type Bundle struct {
	Format int            `json:"format"`
	Run    transcript.Run `json:"run"`
	Shard  int            `json:"shard"`
	// Plugins are the coordinator's plugins a worker must have at the same
	// versions (namespace to version): every Go plugin compiled into it,
	// and the program plugins whose graders a grade shard uses.
	Plugins map[string]string `json:"plugins,omitempty"`
	// Work says what the shard does: WorkCollect ("" too) or WorkGrade.
	// A collect bundle holds Settings, Cases and Trials; a grade bundle
	// holds Grade, and its folder holds the transcripts to grade.
	Work string `json:"work,omitempty"`
	// Grade is a grade shard's work.
	Grade *GradeWork `json:"grade,omitempty"`
	// Settings are the fixed settings the shard's trials run with: one per
	// variant, and one more per case that overrides the model or options.
	Settings []Setting `json:"settings"`
	// Cases are the shard's cases (whole cases: all their variants and
	// trials are in this shard).
	Cases []dataset.Case `json:"cases"`
	// Series are the shard's trials, in the order to start them, as runs
	// of consecutive trials of one case and setting: a bundle's size
	// follows its cases and variants, never its trial count.
	Series []Series `json:"series"`
	// Concurrency is how many trials the worker runs at once.
	Concurrency int `json:"concurrency"`
	// Store, when set, is the URL of the run in a result store that is not
	// a folder of the coordinator's (gs://…, s3://…): the worker writes
	// each transcript there itself, with the credentials of its machine,
	// and its trial messages name where. The URL holds no credential.
	Store string `json:"store,omitempty"`
}

// Setting is one fixed setting of a client, resolved: trials of one setting
// may share a session; trials of two never do.
type Setting struct {
	Variant string `json:"variant"`
	Client  string `json:"client"`
	Model   string `json:"model"`
	// Provider is the model's provider, for limits ("anthropic").
	Provider string `json:"provider,omitempty"`
	// Options are the client's options with the case's overrides, and
	// without MST's own keys (timeout, apiKeyEnv), which are the typed
	// fields below.
	Options json.RawMessage `json:"options,omitempty"`
	// Timeout is the trial timeout (0: none).
	Timeout time.Duration `json:"timeout,omitempty"`
	// KeyEnv is the variable clientOptions.apiKeyEnv named, or "".
	KeyEnv  string           `json:"keyEnv,omitempty"`
	Servers []servers.Server `json:"servers"`
	// CallLimits are this setting's servers whose tool calls the eval caps
	// across shards (limits.serverCalls), each with its cap. The worker
	// asks the coordinator for a place (acquire-call) before each call
	// that reaches one of them; the coordinator holds the caps.
	CallLimits map[string]int `json:"callLimits,omitempty"`
	// GraderRefs are the tools the graders of this setting's trials name;
	// the readiness check refuses the shard when one names a tool or a
	// server the variant does not have.
	GraderRefs []grade.PlacedRef `json:"graderRefs,omitempty"`
}

// GradeWork is what a grade shard grades: the trials, each with its
// transcript in the bundle folder (GradeTranscript), and the graders of
// their cases, as the run stored them. A grade worker loads no dataset.
type GradeWork struct {
	// Set names the grade set the grades go into, for logs only.
	Set string `json:"set,omitempty"`
	// Graders are the eval-level graders every case's trials get, first.
	Graders []json.RawMessage `json:"graders,omitempty"`
	// Cases give each case's own graders (its expect list), after Graders.
	Cases []GradeCase `json:"cases"`
	// Trials are the trials to grade, in order.
	Trials []transcript.Key `json:"trials"`
	// Concurrency is how many trials the worker grades at once.
	Concurrency int `json:"concurrency,omitempty"`
}

// GradeCase is one case's own graders.
type GradeCase struct {
	ID     string            `json:"id"`
	Expect []json.RawMessage `json:"expect,omitempty"`
}

// GradeTranscript is where, in a grade bundle's folder, the transcript of
// trial k is: transcripts/ and the store's name for it.
func GradeTranscript(k transcript.Key) string { return store.TranscriptPath(k) }

// GradePath is where, in a grade worker's results, the grade of trial k
// is: grades/ and then the trial's transcript path without transcripts/.
func GradePath(k transcript.Key) string {
	return "grades/" + strings.TrimPrefix(store.TranscriptPath(k), "transcripts/")
}

// Planned is one trial of a bundle.
type Planned struct {
	transcript.Key
	// Setting indexes Bundle.Settings.
	Setting int `json:"setting"`
	// Replace is set when the trial already has a transcript (errored or
	// cancelled, in a resumed run) that this one replaces.
	Replace bool `json:"replace,omitempty"`
}

// Series is Count trials of one case under one setting, numbered from
// First: trials First, First+1, …, First+Count-1, started in that order.
// A bundle (and a plan) lists its trials as series, so that a run of
// 100,000 trials over 14 cases and 2 variants holds 28 of them, not
// 100,000 keys.
type Series struct {
	Case    string `json:"case"`
	Variant string `json:"variant"`
	// Setting indexes Bundle.Settings (in a plan: Plan.Settings).
	Setting int `json:"setting"`
	First   int `json:"first"`
	Count   int `json:"count"`
	// Replace is set when every trial of the series already has a
	// transcript (errored or cancelled, in a resumed run) that its new
	// one replaces.
	Replace bool `json:"replace,omitempty"`
}

// Trial returns the i-th trial of s (0 ≤ i < s.Count).
func (s Series) Trial(i int) Planned {
	return Planned{Key: transcript.Key{Case: s.Case, Variant: s.Variant, Trial: s.First + i}, Setting: s.Setting, Replace: s.Replace}
}

// Has reports whether k is one of the series' trials.
func (s Series) Has(k transcript.Key) bool {
	return k.Case == s.Case && k.Variant == s.Variant && k.Trial >= s.First && k.Trial < s.First+s.Count
}

// AppendTrial adds the trial p at the end of list: to its last series
// when p is that series' next trial, in a new series otherwise.
func AppendTrial(list []Series, p Planned) []Series {
	if n := len(list); n > 0 {
		l := &list[n-1]
		if l.Case == p.Case && l.Variant == p.Variant && l.Setting == p.Setting && l.Replace == p.Replace && l.First+l.Count == p.Trial {
			l.Count++
			return list
		}
	}
	return append(list, Series{Case: p.Case, Variant: p.Variant, Setting: p.Setting, First: p.Trial, Count: 1, Replace: p.Replace})
}

// SeriesOf lists trials, in order, as series.
func SeriesOf(trials ...Planned) []Series {
	var out []Series
	for _, p := range trials {
		out = AppendTrial(out, p)
	}
	return out
}

// CountTrials is the number of trials in list.
func CountTrials(list []Series) int {
	n := 0
	for _, s := range list {
		n += s.Count
	}
	return n
}

// AllTrials yields every trial of list, in order.
func AllTrials(list []Series) iter.Seq[Planned] {
	return func(yield func(Planned) bool) {
		for _, s := range list {
			for i := range s.Count {
				if !yield(s.Trial(i)) {
					return
				}
			}
		}
	}
}

// Add adds trial p at the end of the bundle's trials.
func (b *Bundle) Add(p Planned) { b.Series = AppendTrial(b.Series, p) }

// Size is the number of trials the bundle runs (or grades).
func (b *Bundle) Size() int {
	if b.Grade != nil {
		return len(b.Grade.Trials)
	}
	return CountTrials(b.Series)
}

// Trials yields the bundle's trials to run, in order.
func (b *Bundle) Trials() iter.Seq[Planned] { return AllTrials(b.Series) }

// Trial returns the bundle's i-th trial to run (0 ≤ i < Size()).
func (b *Bundle) Trial(i int) Planned {
	for _, s := range b.Series {
		if i < s.Count {
			return s.Trial(i)
		}
		i -= s.Count
	}
	panic(fmt.Sprintf("Bundle.Trial(%d): the bundle has %d trials", i, b.Size()))
}

// Keys returns the bundle's trial keys, in order: the trials it runs, or
// those it grades. It makes a list of them all: what has to follow a large
// bundle uses Trials.
func (b *Bundle) Keys() []transcript.Key {
	if b.Grade != nil {
		return slices.Clone(b.Grade.Trials)
	}
	out := make([]transcript.Key, 0, b.Size())
	for p := range b.Trials() {
		out = append(out, p.Key)
	}
	return out
}

// WriteBundle writes b into the folder dir (made if needed), atomically,
// with this MST's bundle format.
func WriteBundle(dir string, b *Bundle) error {
	c := *b
	c.Format = BundleFormat
	data, err := json.Marshal(&c)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, bundleFile), data)
}

// ReadBundle reads the bundle in the folder dir and checks that it is whole.
func ReadBundle(dir string) (*Bundle, error) {
	data, err := os.ReadFile(filepath.Join(dir, bundleFile))
	if err != nil {
		return nil, fmt.Errorf("reading the bundle: %w", err)
	}
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("reading the bundle %s: %w", filepath.Join(dir, bundleFile), err)
	}
	if b.Format != BundleFormat {
		return nil, fmt.Errorf("the bundle in %s has format %d; this MST reads format %d: the worker must run the coordinator's MST", dir, b.Format, BundleFormat)
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("the bundle in %s: %w", dir, err)
	}
	return &b, nil
}

// check makes sure every trial names a setting and a case of the bundle,
// and that a grade bundle holds grade work only.
func (b *Bundle) check() error {
	switch b.Work {
	case "", WorkCollect:
		if b.Grade != nil {
			return errors.New("a collect bundle holds grade work")
		}
	case WorkGrade:
		if b.Grade == nil || len(b.Series) > 0 {
			return errors.New("a grade bundle must hold grade work and no trials to run")
		}
		known := make(map[string]bool, len(b.Grade.Cases))
		for _, c := range b.Grade.Cases {
			known[c.ID] = true
		}
		for _, k := range b.Grade.Trials {
			if !known[k.Case] {
				return fmt.Errorf("trial %s to grade names a case the bundle does not hold", k)
			}
		}
		return nil
	default:
		return fmt.Errorf("the bundle's work is %q; this MST knows %q and %q", b.Work, WorkCollect, WorkGrade)
	}
	cases := make(map[string]bool, len(b.Cases))
	for _, c := range b.Cases {
		cases[c.ID] = true
	}
	for _, t := range b.Series {
		name := "trial " + t.Trial(0).Key.String()
		if t.Count != 1 {
			name = fmt.Sprintf("trials %d to %d of %s/%s", t.First, t.First+t.Count-1, transcript.Printable(t.Variant), transcript.Printable(t.Case))
		}
		if t.Count < 1 || t.First < 1 || t.First > 1<<31 || t.Count > 1<<31 {
			return fmt.Errorf("%s: a series holds one trial or more, numbered from 1 (first %d, count %d)", name, t.First, t.Count)
		}
		if t.Setting < 0 || t.Setting >= len(b.Settings) {
			return fmt.Errorf("%s: setting %d of %d", name, t.Setting, len(b.Settings))
		}
		if !cases[t.Case] {
			return fmt.Errorf("%s: a case the bundle does not hold", name)
		}
		if b.Settings[t.Setting].Variant != t.Variant {
			return fmt.Errorf("%s: setting %d is of variant %s", name, t.Setting, b.Settings[t.Setting].Variant)
		}
	}
	return nil
}

// Assign returns the shard of a case among n: fnv64a(caseID) mod n. It is
// how runs were split before run.CaseShards dealt cases evenly (run.json's
// "fnv64a-mod"), so a resume of such a run still finds where each case
// went; grade shards use it too. The rule never changes.
func Assign(caseID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(caseID))
	return int(h.Sum64() % uint64(n))
}
