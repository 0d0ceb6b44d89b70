package detach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/store"
)

// States of a detached run. Lost is never written: a running status older
// than LostAfter shows as lost (Status.Shown).
const (
	StateStarting  = "starting"
	StateRunning   = "running"
	StateDone      = "done"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StateLost      = "lost"
)

// Phases of a running detached run: the command under way.
const (
	PhaseCollect = "collect"
	PhaseResume  = "resume"
	PhaseGrade   = "grade"
)

// StatusKind and StatusVersion mark a status.json object.
const (
	StatusKind    = "mst.detached"
	StatusVersion = 1
)

// Status is status.json: where a detached run is, as its coordinator last
// wrote it.
type Status struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	ID      string `json:"id"`
	Eval    string `json:"eval"`
	// Command is what was detached: run or grade.
	Command string `json:"command"`
	State   string `json:"state"`
	// Phase is the command under way, or the last one run.
	Phase    string `json:"phase,omitempty"`
	Runner   string `json:"runner"`
	Machine  string `json:"machine,omitempty"`
	Identity string `json:"identity,omitempty"`
	// PID is the coordinator's process id on its machine.
	PID      int        `json:"pid,omitempty"`
	Launched time.Time  `json:"launched"`
	Updated  time.Time  `json:"updated"`
	Ended    *time.Time `json:"ended,omitempty"`
	Deadline time.Time  `json:"deadline,omitzero"`
	// Run is the run's id once known, RunLocation where it is; GradeSet
	// is the grade set a regrade made.
	Run         string `json:"run,omitempty"`
	RunLocation string `json:"runLocation,omitempty"`
	// Results is the result store's URL, as the run was launched with:
	// a resume hint names it.
	Results  string `json:"results,omitempty"`
	GradeSet string `json:"gradeSet,omitempty"`
	// Store and StoreOptions are the credential store flags the run was
	// launched with (connector servers), which a resume gives again.
	Store        string   `json:"store,omitempty"`
	StoreOptions []string `json:"storeOptions,omitempty"`
	// Planned and Collected count the whole run's trials across its steps
	// (collect, resume): planned, and stored so far; Graded the trials
	// graded, by the grade step when there is one. The command under way
	// reports them.
	Planned   int `json:"planned"`
	Collected int `json:"collected"`
	Graded    int `json:"graded"`
	// ExitCode is the exit code of the last command that ended; Error
	// says why the run failed.
	ExitCode *int   `json:"exitCode,omitempty"`
	Error    string `json:"error,omitempty"`
	// Dir is the runner's dir option made absolute, on the machine
	// DirHost names: the folder the run's machines are made in, which no
	// two live runs may share.
	Dir     string `json:"dir,omitempty"`
	DirHost string `json:"dirHost,omitempty"`
	// Cancelling is set once the cancel marker was seen.
	Cancelling bool `json:"cancelling,omitempty"`
	// Commands are the commands run so far, without the secrets file's
	// path: what a person would have typed.
	Commands []string `json:"commands,omitempty"`
	// LastLines are the last lines of the coordinator's output.
	LastLines []string `json:"lastLines,omitempty"`
}

// Live says the run's coordinator is, as far as its status tells, still
// at work at now: neither ended nor lost.
func (s Status) Live(now time.Time) bool {
	st := s.Shown(now)
	return st == StateStarting || st == StateRunning
}

// ResumeHint is the command that finishes the run of a detached run on
// a new coordinator machine, whole, as it can be pasted: the run's id
// ("RUN" while unknown), the result store, and a placeholder for the
// secrets file, which the launching machine gave and nothing keeps.
func (s Status) ResumeHint() string {
	run := s.Run
	if run == "" {
		run = "RUN"
	}
	results := s.Results
	if results == "" {
		results = "STORE-URL"
	}
	return ResumeHint(run, results, StoreArgs(s.Store, s.StoreOptions)...)
}

// StoreArgs are the --store and --store-option flags of a credential
// store other than the default.
func StoreArgs(store string, options []string) []string {
	if store == "" {
		return nil
	}
	a := []string{"--store", store}
	for _, o := range options {
		a = append(a, "--store-option", o)
	}
	return a
}

// ResumeHint is mst run --resume run --results results, then store (the
// credential store's flags, StoreArgs), then --secrets-file
// YOUR-SECRETS-FILE --detach, followed by a sentence saying why the
// secrets file must be named again.
func ResumeHint(run, results string, store ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mst run --resume %s --results %s", quote(run), quote(results))
	for _, a := range store {
		b.WriteString(" " + quote(a))
	}
	b.WriteString(" --secrets-file YOUR-SECRETS-FILE --detach (the secrets file is not kept anywhere: give yours again)")
	return b.String()
}

// quote quotes s for a POSIX shell when it holds anything a shell treats
// specially.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Ended says the run has ended, one way or another.
func (s Status) Over() bool {
	return s.State == StateDone || s.State == StateFailed || s.State == StateCancelled
}

// Shown is the state to show at now: lost for a coordinator that has not
// written its status for LostAfter.
func (s Status) Shown(now time.Time) string {
	if !s.Over() && now.Sub(s.Updated) > LostAfter {
		return StateLost
	}
	return s.State
}

// Records are the detached runs of one eval in a result store: for each,
// status.json, log.txt and cancel, where the store keeps detached runs
// (store.DetachedPath).
//
// Every read, write and listing goes through the store's calls, under
// their deadlines and retries: a store that stops answering fails them
// wrapping store.ErrUnavailable.
type Records struct {
	st   store.DetachedRecords
	eval string
}

// NewRecords returns the records of eval's detached runs in st.
func NewRecords(st store.DetachedRecords, eval string) *Records {
	return &Records{st: st, eval: eval}
}

// Where says where the records of id are, for people.
func (r *Records) Where(id string) string { return r.st.DetachedWhere(r.eval, id, "") }

func (r *Records) where(id, name string) string { return r.st.DetachedWhere(r.eval, id, name) }

const (
	statusName = "status.json"
	logName    = "log.txt"
	cancelName = "cancel"
)

// maxStatus bounds a status.json read.
const maxStatus = 1 << 20

// WriteStatus replaces id's status.
func (r *Records) WriteStatus(ctx context.Context, s Status) error {
	s.Kind, s.Version = StatusKind, StatusVersion
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := r.st.PutDetached(ctx, r.eval, s.ID, statusName, append(data, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", r.where(s.ID, statusName), err)
	}
	return nil
}

// ErrNotFound is wrapped by errors about a detached run the store does
// not hold.
var ErrNotFound = errors.New("no such detached run")

// ReadStatus reads id's status.
func (r *Records) ReadStatus(ctx context.Context, id string) (Status, error) {
	var s Status
	data, err := r.read(ctx, id, statusName, maxStatus)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: damaged: %v", r.where(id, statusName), err)
	}
	if s.Kind != StatusKind {
		return s, fmt.Errorf("%s: not a detached run's status (kind %q)", r.where(id, statusName), s.Kind)
	}
	return s, nil
}

func (r *Records) read(ctx context.Context, id, name string, limit int64) ([]byte, error) {
	data, err := r.st.GetDetached(ctx, r.eval, id, name, limit)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%s: %w", r.where(id, name), ErrNotFound)
		}
		return nil, fmt.Errorf("reading %s: %w", r.where(id, name), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", r.where(id, name), limit)
	}
	return data, nil
}

// WriteLog replaces id's log.
func (r *Records) WriteLog(ctx context.Context, id string, data []byte) error {
	if err := r.st.PutDetached(ctx, r.eval, id, logName, data); err != nil {
		return fmt.Errorf("writing %s: %w", r.where(id, logName), err)
	}
	return nil
}

// maxLog bounds a log read.
const maxLog = 256 << 20

// ReadLog reads id's log as last uploaded.
func (r *Records) ReadLog(ctx context.Context, id string) ([]byte, error) {
	return r.read(ctx, id, logName, maxLog)
}

// Cancel writes id's cancel marker.
func (r *Records) Cancel(ctx context.Context, id string, by string) error {
	return r.st.PutDetached(ctx, r.eval, id, cancelName, []byte(by+"\n"))
}

// Cancelled says whether id's cancel marker is there.
func (r *Records) Cancelled(ctx context.Context, id string) (bool, error) {
	return r.st.HasDetached(ctx, r.eval, id, cancelName)
}

// List reads the status of every detached run of the eval, newest first.
// A record that cannot be read is returned in bad, by id.
func (r *Records) List(ctx context.Context) (list []Status, bad map[string]error, err error) {
	ids, err := r.st.DetachedIDs(ctx, r.eval)
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", r.where("", ""), err)
	}
	for _, id := range ids {
		s, err := r.ReadStatus(ctx, id)
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[id] = err
			continue
		}
		list = append(list, s)
	}
	slices.SortFunc(list, func(a, b Status) int {
		if c := b.Launched.Compare(a.Launched); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return list, bad, nil
}

// Resolve finds the detached run ref names: its whole id, or its last six
// characters (or more), when one run alone ends so.
func (r *Records) Resolve(ctx context.Context, ref string) (string, error) {
	if ref == "" || strings.ContainsAny(ref, `/\`) {
		return "", fmt.Errorf("%q is not a detached run's id: give its id, or its last six characters, as mst runs list shows them", ref)
	}
	if ok, err := r.st.HasDetached(ctx, r.eval, ref, statusName); err != nil {
		return "", err
	} else if ok {
		return ref, nil
	}
	list, bad, err := r.List(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	for id := range bad {
		ids = append(ids, id)
	}
	var found []string
	if len(ref) >= 6 {
		for _, id := range ids {
			if strings.HasSuffix(id, ref) {
				found = append(found, id)
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		hint := "mst runs list shows them"
		if len(ref) < 6 {
			hint = "give at least its last six characters; " + hint
		}
		return "", fmt.Errorf("%s holds no detached run %s (%s): %w", r.where("", ""), ref, hint, ErrNotFound)
	default:
		slices.Sort(found)
		return "", fmt.Errorf("%s names %d detached runs (%s): give more of the id", ref, len(found), strings.Join(found, ", "))
	}
}
