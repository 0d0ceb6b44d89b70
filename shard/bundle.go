package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/atomicfile"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// BundleFormat is the version of the bundle this MST writes and reads. A
// worker runs the coordinator's own MST (hello refuses any other), so a
// bundle of another format is refused as such.
const BundleFormat = 3

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
	// Trials are the shard's trials, in the order to start them.
	Trials []Planned `json:"trials"`
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

// Keys returns the bundle's trial keys, in order: the trials it runs, or
// those it grades.
func (b *Bundle) Keys() []transcript.Key {
	if b.Grade != nil {
		return slices.Clone(b.Grade.Trials)
	}
	out := make([]transcript.Key, len(b.Trials))
	for i, t := range b.Trials {
		out[i] = t.Key
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
		if b.Grade == nil || len(b.Trials) > 0 {
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
	for _, t := range b.Trials {
		if t.Setting < 0 || t.Setting >= len(b.Settings) {
			return fmt.Errorf("trial %s names setting %d of %d", t.Key, t.Setting, len(b.Settings))
		}
		if !cases[t.Case] {
			return fmt.Errorf("trial %s names a case the bundle does not hold", t.Key)
		}
		if b.Settings[t.Setting].Variant != t.Variant {
			return fmt.Errorf("trial %s names setting %d of variant %s", t.Key, t.Setting, b.Settings[t.Setting].Variant)
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
