package detach

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/store"
)

// Names of the files of a coordinator bundle.
const (
	SpecFile     = "detach.json"
	DatasetsFile = "datasets.json"
	// GradersFile is the --graders file of a detached mst grade, when one
	// was given.
	GradersFile = "graders.json"
	// LogFile is the coordinator's output on its machine.
	LogFile = "log.txt"
	// StartedFile appears once the coordinator has written its first
	// status: mst coordinate returns then.
	StartedFile = "started"
)

// Commands a detached run can start with.
const (
	CommandRun   = "run"
	CommandGrade = "grade"
)

// SpecKind and SpecVersion mark a detach.json file.
const (
	SpecKind    = "mst.detach"
	SpecVersion = 1
)

// Spec is detach.json: what the launching machine resolved, and what the
// coordinator runs. It holds no secret: the secrets file's values travel
// on mst coordinate's stdin.
type Spec struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// ID is the detached run's id.
	ID string `json:"id"`
	// Eval is the eval's name, which the records are kept under.
	Eval string `json:"eval"`
	// Command is CommandRun or CommandGrade.
	Command string `json:"command"`
	// Config is the eval config file's name in the bundle; ConfigOrigin
	// its absolute path, and ConfigDir its folder, on the launching
	// machine (the config's relative paths start there).
	Config       string `json:"config"`
	ConfigOrigin string `json:"configOrigin"`
	ConfigDir    string `json:"configDir"`
	// Results is the result store's URL.
	Results string `json:"results"`
	// Runner and RunnerOptions are --runner and its --runner-option
	// pairs, as given.
	Runner        string   `json:"runner"`
	RunnerOptions []string `json:"runnerOptions,omitempty"`
	// GradeRunner is mst run's --grade-runner: grade on that runner once
	// every trial is collected.
	GradeRunner string `json:"gradeRunner,omitempty"`
	// The selection flags of mst run.
	Variants []string `json:"variants,omitempty"`
	Cases    []string `json:"cases,omitempty"`
	Trials   int      `json:"trials,omitempty"`
	Limit    int      `json:"limit,omitempty"`
	// Resume is the run to finish (mst run --resume RUN --detach) or to
	// grade (mst grade RUN --detach), by id.
	Resume       string `json:"resume,omitempty"`
	RetryErrored bool   `json:"retryErrored,omitempty"`
	NoGrade      bool   `json:"noGrade,omitempty"`
	MaxErrored   string `json:"maxErrored,omitempty"`
	// RunDeadline is mst run's --deadline, 0 for none.
	RunDeadline Duration `json:"runDeadline,omitempty"`
	// GradeSet is mst grade's --resume N; Graders says graders.json holds
	// the --graders file's graders.
	GradeSet string `json:"gradeSet,omitempty"`
	Graders  bool   `json:"graders,omitempty"`
	// Store and StoreOptions are the credential store flags of the run
	// (connector servers).
	Store        string   `json:"store,omitempty"`
	StoreOptions []string `json:"storeOptions,omitempty"`
	// Dir and DirHost are the runner's dir option, made absolute, and
	// the machine it is on (Status.Dir).
	Dir     string `json:"dir,omitempty"`
	DirHost string `json:"dirHost,omitempty"`
	// Secrets lists the names of the secrets the coordinator gets on its
	// stdin (not their values), so it can tell a stdin that lost some.
	Secrets []string `json:"secrets,omitempty"`

	// Machine is the coordinator machine's id, Identity what it runs as;
	// MST runs mst there, Env is added to its commands' environment, and
	// Finish runs there at the very end.
	Machine  string `json:"machine"`
	Identity string `json:"identity,omitempty"`
	// WorkDir is the machine's work folder, where the coordinator writes
	// its pid (runner.CoordinatorPIDFile) for the runner's watchdog.
	WorkDir string   `json:"workDir,omitempty"`
	MST     []string `json:"mst"`
	Env     []string `json:"env,omitempty"`
	Finish  []string `json:"finish,omitempty"`
	// Deadline is when the coordinator stops whatever it is doing; the
	// runner removes the machine soon after by itself.
	Deadline time.Time `json:"deadline"`
	Launched time.Time `json:"launched"`
	// Heartbeat and LogEvery are how often status.json and log.txt are
	// written; zero means the defaults (tests set them small).
	Heartbeat Duration `json:"heartbeat,omitempty"`
	LogEvery  Duration `json:"logEvery,omitempty"`
}

// Defaults of Spec.Heartbeat and Spec.LogEvery, and how old a running
// coordinator's status may grow before it shows as lost.
const (
	DefaultHeartbeat = 30 * time.Second
	DefaultLogEvery  = time.Minute
	LostAfter        = 5 * time.Minute
)

// Duration is a time.Duration written as "90s" in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func (s *Spec) heartbeat() time.Duration {
	if s.Heartbeat > 0 {
		return time.Duration(s.Heartbeat)
	}
	return DefaultHeartbeat
}

func (s *Spec) logEvery() time.Duration {
	if s.LogEvery > 0 {
		return time.Duration(s.LogEvery)
	}
	return DefaultLogEvery
}

// NewID makes a detached run's id: the eval's name, the time, and six
// random hex digits, which name it alone in mst runs.
func NewID(eval string, now time.Time) string {
	b := make([]byte, 3)
	rand.Read(b)
	return fmt.Sprintf("%s-%s-%s", store.SafeName(eval), now.UTC().Format("20060102-150405"), hex.EncodeToString(b))
}

// WriteSpec writes s as dir/detach.json.
func WriteSpec(dir string, s *Spec) error {
	s.Kind, s.Version = SpecKind, SpecVersion
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, SpecFile), append(data, '\n'))
}

// ReadSpec reads dir/detach.json.
func ReadSpec(dir string) (*Spec, error) {
	data, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return nil, fmt.Errorf("the coordinator bundle: %w", err)
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("the coordinator bundle's %s: %v", SpecFile, err)
	}
	if s.Kind != SpecKind || s.Version != SpecVersion {
		return nil, fmt.Errorf("the coordinator bundle's %s is not an %s file of version %d (kind %q, version %d): launch it with this MST", SpecFile, SpecKind, SpecVersion, s.Kind, s.Version)
	}
	switch {
	case s.ID == "" || strings.ContainsAny(s.ID, `/\`):
		return nil, fmt.Errorf("the coordinator bundle's %s has no valid id", SpecFile)
	case s.Command != CommandRun && s.Command != CommandGrade:
		return nil, fmt.Errorf("the coordinator bundle's %s: command %q is neither %s nor %s", SpecFile, s.Command, CommandRun, CommandGrade)
	case s.Results == "" || len(s.MST) == 0 || s.Config == "":
		return nil, fmt.Errorf("the coordinator bundle's %s lacks the results, the mst command or the config", SpecFile)
	}
	return &s, nil
}
