package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/internal/ground/inputcheck"
	"github.com/mst-eval/mst/internal/ground/runlock"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// The files of a run folder. Only this package knows them; layout.go
// exports the names every store shares.
const (
	runFile        = "run.json"
	prevRunFile    = "run.prev.json" // the record before the latest, for when run.json is damaged
	lockFile       = "run.lock"
	casesFile      = "cases.jsonl"
	gradersFile    = "graders.json"
	gradesFile     = "grades.jsonl"
	oldGradesFile  = "grades.json" // runs before grades were appended
	transcriptsDir = "transcripts"
	configBase     = "eval"
)

// Dir is the directory store: one folder per run, under a folder per eval.
//
//	ROOT/EVAL/runs/RUN-ID/run.json                 the run record (transcript.Run)
//	ROOT/EVAL/runs/RUN-ID/eval.yaml                the config file the run was made from
//	ROOT/EVAL/runs/RUN-ID/cases.jsonl              the cases, as loaded
//	ROOT/EVAL/runs/RUN-ID/graders.json             the eval's graders, as written
//	ROOT/EVAL/runs/RUN-ID/transcripts/VARIANT/CASE.tN.json   one transcript per trial
//	ROOT/EVAL/runs/RUN-ID/grades.jsonl             one grade per line, appended: grade set 1
//	ROOT/EVAL/runs/RUN-ID/gradesets/N.json         grade set N: what made it, its graders
//	ROOT/EVAL/runs/RUN-ID/gradesets/N.jsonl        the grades of set N (N ≥ 2)
//	ROOT/EVAL/runs/RUN-ID/run.prev.json            a second copy of the run record
//	ROOT/EVAL/runs/RUN-ID/run.lock                 held by the run's writer; names it
//
// EVAL is the eval's name as SafeName writes it, the segment a bucket
// store's keys have (PREFIX/EVAL/runs/RUN-ID/), so a results folder and a
// bucket are laid out alike. VARIANT and CASE are names made from the ids
// that any file system takes and that stay distinct where file names are
// compared ignoring case (see names.go).
//
// Older versions made ROOT/RUN-ID, with the same files: Open finds those
// runs too, and they are read and resumed where they are, never moved.
// Their runs may also hold grades.json instead of grades.jsonl, no
// graders.json, and transcripts named the old way.
type Dir struct {
	Root string
	// Eval is the eval whose runs Create makes (its name, as in the
	// config); Create needs it. Open looks under every eval when it is "".
	Eval string
}

// Location is the store's folder.
func (d Dir) Location() string { return d.Root }

// runsDir is the folder of an eval's runs under the eval's folder.
const runsDir = "runs"

// EvalRunsDir is the folder of eval's runs in the results folder root:
// ROOT/EVAL/runs.
func EvalRunsDir(root, eval string) string {
	return filepath.Join(root, SafeName(eval), runsDir)
}

// Create makes ROOT/EVAL/runs/id.
func (d Dir) Create(ctx context.Context, id string, redact *secrets.Redactor) (Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if d.Eval == "" {
		return nil, errors.New("store.Dir: Create needs the eval's name (Dir.Eval)")
	}
	runs := EvalRunsDir(d.Root, d.Eval)
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return nil, fmt.Errorf("creating the results folder %s: %w", runs, err)
	}
	// An older version's run of this id would make Open ambiguous.
	if old := filepath.Join(d.Root, id); exists(filepath.Join(old, runFile)) {
		return nil, fmt.Errorf("creating run %s: %s already exists", id, old)
	}
	dir := filepath.Join(runs, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("creating run %s: %s already exists", id, dir)
		}
		return nil, fmt.Errorf("creating the run folder: %w", err)
	}
	return OpenDir(dir, redact), nil
}

// ErrAmbiguous means a run id names more than one run of a store.
var ErrAmbiguous = errors.New("more than one run has that id")

// Open opens the run id: ROOT/EVAL/runs/id (under Eval, or under any eval
// when Eval is ""), or ROOT/id, where older versions put runs. An id found
// at two places is an error naming both.
func (d Dir) Open(ctx context.Context, id string, redact *secrets.Redactor) (Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	places, err := d.places(id)
	if err != nil {
		return nil, err
	}
	var runs, folders []string
	for _, p := range places {
		if exists(filepath.Join(p, runFile)) {
			runs = append(runs, p)
		} else if st, err := os.Stat(p); err == nil && st.IsDir() {
			folders = append(folders, p)
		}
	}
	switch {
	case len(runs) == 1:
		return OpenDir(runs[0], redact), nil
	case len(runs) > 1:
		return nil, fmt.Errorf("run %s: %w: %s; give the folder of the one you mean", id, ErrAmbiguous, strings.Join(runs, " and "))
	case len(folders) > 0:
		return OpenRunDir(folders[0], redact) // says it is not a run folder
	}
	return nil, fmt.Errorf("run %s: not in %s (looked for %s and %s): %w", id, d.Root,
		filepath.Join(d.Root, "EVAL", runsDir, id), filepath.Join(d.Root, id), ErrNotFound)
}

// places are the folders the run id can be in: ROOT/EVAL/runs/id for the
// store's eval, or for every folder of ROOT when it has none, then ROOT/id.
func (d Dir) places(id string) ([]string, error) {
	var out []string
	if d.Eval != "" {
		out = append(out, filepath.Join(EvalRunsDir(d.Root, d.Eval), id))
	} else {
		ents, err := os.ReadDir(d.Root)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("looking for run %s in %s: %w", id, d.Root, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Join(d.Root, e.Name(), runsDir, id))
			}
		}
	}
	return append(out, filepath.Join(d.Root, id)), nil
}

// List lists every run in the store, of either layout, newest first.
func (d Dir) List(ctx context.Context) ([]RunSummary, error) {
	ents, err := os.ReadDir(d.Root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []RunSummary
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(d.Root, e.Name())
		if exists(filepath.Join(dir, runFile)) {
			out = append(out, summarize(ctx, dir))
			continue
		}
		runs, err := ListRunDir(ctx, filepath.Join(dir, runsDir))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		out = append(out, runs...)
	}
	SortRuns(out)
	return out, nil
}

// ListRunDir lists the runs in the folder dir (ROOT/EVAL/runs), newest
// first: every folder in it that has a run.json.
func ListRunDir(ctx context.Context, dir string) ([]RunSummary, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []RunSummary
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		run := filepath.Join(dir, e.Name())
		if e.IsDir() && exists(filepath.Join(run, runFile)) {
			out = append(out, summarize(ctx, run))
		}
	}
	SortRuns(out)
	return out, nil
}

// summarize reads the record of the run in the folder dir.
func summarize(ctx context.Context, dir string) RunSummary {
	r := OpenDir(dir, nil)
	sum := RunSummary{ID: r.ID(), Location: dir}
	sum.Record, sum.Err = r.ReadRun(ctx)
	if sum.Err != nil {
		sum.Record = transcript.Run{}
	}
	return sum
}

// exists says whether there is a file at path.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func checkID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) {
		return fmt.Errorf("%q is not a run id", id)
	}
	return nil
}

// OpenRunDir opens the stored run in the folder dir: one that has a
// run.json.
func OpenRunDir(dir string, redact *secrets.Redactor) (*DirRun, error) {
	if _, err := os.Stat(filepath.Join(dir, runFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: not a run folder (it has no %s): %w; give the folder mst run printed, e.g. mst-results/<eval>/runs/<run-id>", dir, runFile, ErrNotFound)
		}
		return nil, err
	}
	return OpenDir(dir, redact), nil
}

// OpenDir returns the run kept in the folder dir, which need not hold
// anything yet: a worker writes its shard's transcripts into one.
func OpenDir(dir string, redact *secrets.Redactor) *DirRun {
	return &DirRun{dir: dir, redact: redact}
}

// DirRun is a run kept in a folder.
type DirRun struct {
	dir    string
	redact *secrets.Redactor
	// mu serializes appends to the grades file.
	mu sync.Mutex
}

// ID is the folder's name.
func (r *DirRun) ID() string { return filepath.Base(r.dir) }

// Location is the run's folder.
func (r *DirRun) Location() string { return r.dir }

func (r *DirRun) path(name string) string { return filepath.Join(r.dir, filepath.FromSlash(name)) }

func (r *DirRun) write(name string, data []byte) error {
	return atomicfile.Write(r.path(name), r.redact.Bytes(data))
}

func (r *DirRun) writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return r.write(name, append(b, '\n'))
}

func (r *DirRun) readJSON(name string, v any) error {
	b, err := os.ReadFile(r.path(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", r.path(name), ErrNotFound)
		}
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("%s: %w", r.path(name), errEmpty)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", r.path(name), err)
	}
	return nil
}

// Lock takes run.lock (see package runlock): the operating system lets it
// go when this process ends.
func (r *DirRun) Lock(ctx context.Context, owner transcript.Owner) (func() error, error) {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	l, err := runlock.Acquire(r.path(lockFile), runlock.Owner{PID: owner.PID, Host: owner.Host, Started: owner.Started})
	var busy *runlock.BusyError
	if errors.As(err, &busy) {
		return nil, &BusyError{Location: r.dir, Owner: transcript.Owner{PID: busy.Owner.PID, Host: busy.Owner.Host, Started: busy.Owner.Started}}
	}
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// Holder tests run.lock without taking it.
func (r *DirRun) Holder(ctx context.Context) (transcript.Owner, bool, error) {
	o, held, err := runlock.Holder(r.path(lockFile))
	return transcript.Owner{PID: o.PID, Host: o.Host, Started: o.Started}, held, err
}

// WriteRun writes run.json, then the same record to run.prev.json: were
// one of them damaged, the other holds this record or the one before.
func (r *DirRun) WriteRun(ctx context.Context, rec transcript.Run) error {
	if err := r.writeJSON(runFile, rec); err != nil {
		return err
	}
	return r.writeJSON(prevRunFile, rec)
}

// ReadRun reads run.json, or run.prev.json when run.json is damaged, and
// shows a run that says running with no live owner as interrupted.
func (r *DirRun) ReadRun(ctx context.Context) (transcript.Run, error) {
	rec, err := r.readRunFile(runFile)
	if errors.Is(err, errUnreadable) {
		prev, perr := r.readRunFile(prevRunFile)
		if perr != nil {
			return rec, fmt.Errorf("%w: %v; its copy %s cannot be read either (%v), so the run's record is lost: its transcripts under %s are kept, but it cannot be reported or resumed; start a new run", ErrDamaged, err, r.path(prevRunFile), perr, r.path(transcriptsDir))
		}
		rec = prev
		rec.Note = strings.TrimPrefix(rec.Note+"; "+runFile+" was damaged and was read from "+prevRunFile, "; ")
		err = nil
	}
	if err != nil {
		return rec, err
	}
	if rec.Collect == transcript.CollectRunning {
		o, live, herr := r.Holder(ctx)
		if herr != nil {
			return rec, herr
		}
		rec = MarkInterrupted(rec, o, live)
	}
	return rec, nil
}

// errEmpty is the error of an empty JSON file.
var errEmpty = errors.New("the file is empty")

// maxRunBytes bounds a run record: the largest run.json MST reads. A real
// one holds the plan's settings and is far smaller.
const maxRunBytes = 32 << 20

// errUnreadable marks a run record that is there but cannot be read: cut
// short, too large, not UTF-8 text, nested too deep, or not a run record.
var errUnreadable = errors.New("unreadable run record")

// readRunFile reads and decodes one copy of the run record with the
// checks every reader of stored records makes: a bounded size, UTF-8
// text (the JSON decoder would replace bad bytes silently), bounded
// nesting, and transcript.DecodeRun. A copy that fails them wraps
// errUnreadable, so ReadRun turns to the other copy.
func (r *DirRun) readRunFile(name string) (transcript.Run, error) {
	path := r.path(name)
	unreadable := func(why error) error {
		return fmt.Errorf("%s: %w (%w)", path, why, errUnreadable)
	}
	b, err := inputcheck.ReadFile(path, maxRunBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return transcript.Run{}, fmt.Errorf("%s: %w", path, ErrNotFound)
	case errors.Is(err, inputcheck.ErrTooLarge):
		return transcript.Run{}, unreadable(err)
	case err != nil:
		return transcript.Run{}, err
	}
	return decodeRunRecord(b, path)
}

// WriteConfig writes eval.yaml (or eval.json, after name's extension).
func (r *DirRun) WriteConfig(ctx context.Context, name string, data []byte) error {
	ext := ".yaml"
	if strings.EqualFold(filepath.Ext(name), ".json") {
		ext = ".json"
	}
	return r.write(configBase+ext, data)
}

// WriteCases writes cases.jsonl.
func (r *DirRun) WriteCases(ctx context.Context, cases []transcript.Case) error {
	var b bytes.Buffer
	for _, c := range cases {
		line, err := json.Marshal(c)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return r.write(casesFile, b.Bytes())
}

// ReadCases reads cases.jsonl.
func (r *DirRun) ReadCases(ctx context.Context) ([]transcript.Case, error) {
	f, err := os.Open(r.path(casesFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", r.path(casesFile), ErrNotFound)
		}
		return nil, err
	}
	defer f.Close()
	var cases []transcript.Case
	err = eachLine(f, func(line []byte, last bool) error {
		// Numbers in metadata are json.Number, as the dataset loaders give them.
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var c transcript.Case
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		cases = append(cases, c)
		return nil
	})
	return cases, err
}

// WriteGraders writes graders.json.
func (r *DirRun) WriteGraders(ctx context.Context, specs []json.RawMessage) error {
	if specs == nil {
		specs = []json.RawMessage{}
	}
	return r.writeJSON(gradersFile, specs)
}

// ReadGraders reads graders.json; a run without one has no graders.
func (r *DirRun) ReadGraders(ctx context.Context) ([]json.RawMessage, error) {
	var specs []json.RawMessage
	if err := r.readJSON(gradersFile, &specs); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	return specs, nil
}

func (r *DirRun) encodeTranscript(t *transcript.Transcript) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return r.redact.Bytes(append(b, '\n')), nil
}

// WriteTranscript writes the transcript's file, failing with ErrExists when
// there is one: the file is linked into place, which fails when the name is
// taken, so two writers of one trial cannot both win.
func (r *DirRun) WriteTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	rel := r.locate(t.Key)
	b, err := r.encodeTranscript(t)
	if err != nil {
		return "", err
	}
	if err := atomicfile.Create(r.path(rel), b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if _, rerr := readTranscriptFile(r.path(rel)); errors.Is(rerr, ErrDamaged) {
				// What is there is not a transcript (a crash cut it short):
				// the trial has none, and this one takes its place.
				return rel, atomicfile.Write(r.path(rel), b)
			}
			return "", fmt.Errorf("%s: %w", r.path(rel), ErrExists)
		}
		return "", err
	}
	return rel, nil
}

// damagedError is a transcript file that is not whole.
type damagedError struct {
	path string
	err  error
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("%s is damaged (%v): it counts as missing, and mst run --resume runs the trial again", e.path, e.err)
}
func (e *damagedError) Unwrap() []error { return []error{ErrDamaged, ErrNotFound, e.err} }

// readTranscriptFile reads and decodes one transcript file; one that is
// empty or does not decode (cut short) fails as damaged.
func readTranscriptFile(path string) (*transcript.Transcript, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeTranscript(b, path)
}

// looksWhole says, from its last bytes only, whether a transcript file can
// be whole: every transcript is a JSON object, so it ends with "}" (and
// white space); a file cut short (empty, or ending mid-way) almost never
// does, and one that does anyway fails to decode when read.
func looksWhole(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() < 2 {
		return false
	}
	n := min(st.Size(), 16)
	tail := make([]byte, n)
	if _, err := f.ReadAt(tail, st.Size()-n); err != nil {
		return false
	}
	return bytes.HasSuffix(bytes.TrimRight(tail, " \t\r\n"), []byte("}"))
}

// ReplaceTranscript writes the transcript's file, replacing any.
func (r *DirRun) ReplaceTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	rel := r.locate(t.Key)
	b, err := r.encodeTranscript(t)
	if err != nil {
		return "", err
	}
	return rel, atomicfile.Write(r.path(rel), b)
}

// ReadTranscript reads the transcript of key.
func (r *DirRun) ReadTranscript(ctx context.Context, key transcript.Key) (*transcript.Transcript, error) {
	t, err := readTranscriptFile(r.path(r.locate(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("transcript of %s: %w", key, ErrNotFound)
	}
	return t, err
}

// locate is where the transcript of k is: in the current layout, or where
// an older version put it when there is one there. That one must hold k's
// transcript, not one whose name folds to the same where case is ignored.
func (r *DirRun) locate(k transcript.Key) string {
	rel, old := transcriptPath(k), legacyPath(k)
	if old == rel {
		return rel
	}
	if fk, err := readKey(r.path(old)); err == nil && fk == k {
		return old
	}
	return rel
}

// walk calls fn with the key and path of every transcript file, once per
// key: a key met at two places (the current layout's and an older
// version's) is given at the first place the walk meets it. No set of the
// keys met is kept, so a walk's memory does not grow with the run; the
// other place of a key is looked at only when its name differs between the
// two layouts (see metBefore).
func (r *DirRun) walk(ctx context.Context, fn func(k transcript.Key, path string) error) error {
	root := r.path(transcriptsDir)
	err := walkNames(root, "", func(path, rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, ok := fileKey(path, rel)
		if !ok || r.metBefore(k, path, rel) {
			return nil // not a transcript (cut short, or someone else's file), or a key met already
		}
		return fn(k, path)
	})
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(root); errors.Is(serr, fs.ErrNotExist) {
			return nil // no transcript yet
		}
	}
	return err
}

// walkNames calls fn for every file under the folder dir (rel: its
// slash-separated path under the walk's root, "" for the root), in the
// order filepath.WalkDir visits them: each folder's entries by name,
// folders entered where they come. It keeps only the names of each
// folder on the way down, not an entry a file as WalkDir does: a folder
// of 50,000 transcripts costs about a megabyte, not five.
func walkNames(dir, rel string, fn func(path, rel string) error) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		path, sub := filepath.Join(dir, name), name
		if rel != "" {
			sub = rel + "/" + name
		}
		st, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile (a temporary file put in place)
		}
		if err != nil {
			return err
		}
		if st.IsDir() {
			err = walkNames(path, sub, fn)
		} else {
			err = fn(path, sub)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fileKey is the key of the transcript file at path (rel: its
// slash-separated path under the transcripts folder), as walk reads it:
// from its name, or from the file where its name was cut to fit. ok is
// false for a file cut short, or one whose name is not a transcript's.
func fileKey(path, rel string) (k transcript.Key, ok bool) {
	if !looksWhole(path) {
		return transcript.Key{}, false // cut short: the trial has no transcript
	}
	k, ok, cut := keyOf(rel)
	if !ok && cut {
		// A name cut to fit: the file says whose it is. (It may be
		// an older version's name that looks like one.)
		at := transcriptsDir + "/" + rel
		if fk, err := readKey(path); err == nil && (at == transcriptPath(fk) || at == legacyPath(fk)) {
			k, ok = fk, true
		}
	}
	if !ok {
		k, ok = legacyKeyOf(rel)
	}
	return k, ok
}

// metBefore says whether walk, which found the transcript of k at path
// (rel under the transcripts folder), met k before, at its other place: a
// key has at most two, its names in the current layout and in an older
// version's, and these are the same for an id of plain characters.
func (r *DirRun) metBefore(k transcript.Key, path, rel string) bool {
	if plain(k.Variant, "") && plain(k.Case, trialSuffix(k.Trial)) {
		return false // both layouts name it alike: it has one place
	}
	at := transcriptsDir + "/" + rel
	other := transcriptPath(k)
	if other == at {
		other = legacyPath(k)
	}
	if other == at {
		return false
	}
	other = strings.TrimPrefix(other, transcriptsDir+"/")
	if !walksBefore(other, rel) {
		return false
	}
	op := r.path(transcriptsDir + "/" + other)
	ok, ost := statSame(op, path)
	if !ok || ost {
		return false // not there, or the same file under a name that folds to it
	}
	fk, found := fileKey(op, other)
	return found && fk == k
}

// statSame says whether a file is at a, and whether it is the file at b.
func statSame(a, b string) (exists, same bool) {
	as, err := os.Stat(a)
	if err != nil {
		return false, false
	}
	bs, err := os.Stat(b)
	return true, err == nil && os.SameFile(as, bs)
}

// walksBefore says whether walkNames (as filepath.WalkDir), which visits
// each folder's entries by name, meets the file at slash-separated path a
// before the one at b.
func walksBefore(a, b string) bool {
	for {
		ha, ta, moreA := strings.Cut(a, "/")
		hb, tb, moreB := strings.Cut(b, "/")
		if ha != hb || !moreA || !moreB {
			return ha < hb
		}
		a, b = ta, tb
	}
}

// Keys lists the transcripts' keys from their file names, reading the key
// from the file only where its name was cut to fit.
func (r *DirRun) Keys(ctx context.Context) ([]transcript.Key, error) {
	var keys []transcript.Key
	err := r.walk(ctx, func(k transcript.Key, _ string) error {
		keys = append(keys, k)
		return nil
	})
	return keys, err
}

// KeyWalker is what a Run offers that can give its transcripts' keys one
// at a time: the keys Keys lists, in the same order, without a list of
// them, so a caller that keeps less than a key per trial (a table of its
// own plan) keeps memory flat. Dir's runs implement it.
type KeyWalker interface {
	// EachKey calls fn with the key of every stored transcript; an error
	// from fn stops it.
	EachKey(ctx context.Context, fn func(transcript.Key) error) error
}

// EachKey calls fn with every key Keys lists, as the walk meets them.
func (r *DirRun) EachKey(ctx context.Context, fn func(transcript.Key) error) error {
	return r.walk(ctx, func(k transcript.Key, _ string) error { return fn(k) })
}

var _ KeyWalker = (*DirRun)(nil)

// Transcripts reads every transcript, one at a time.
func (r *DirRun) Transcripts(ctx context.Context, fn func(*transcript.Transcript) error) error {
	return r.walk(ctx, func(_ transcript.Key, path string) error {
		t, err := readTranscriptFile(path)
		if errors.Is(err, ErrDamaged) {
			return nil // as if not stored
		}
		if err != nil {
			return err
		}
		return fn(t)
	})
}

// AppendGrades appends one line per grade to grades.jsonl, in one write.
func (r *DirRun) AppendGrades(ctx context.Context, gs ...transcript.TrialGrade) error {
	return r.appendGrades(gradesFile, gs)
}

// appendGrades appends one line per grade to the named grades file.
func (r *DirRun) appendGrades(name string, gs []transcript.TrialGrade) error {
	if len(gs) == 0 {
		return nil
	}
	lines, err := EncodeGrades(gs)
	if err != nil {
		return err
	}
	data := r.redact.Bytes(lines)
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path(name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("appending grades: %w", err)
	}
	if err := repairTornEnd(f); err != nil {
		f.Close()
		return fmt.Errorf("appending grades: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync() // a grade once appended survives a power cut
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("appending grades to %s: %w", r.path(name), err)
	}
	return nil
}

// repairTornEnd ends the file with a newline when a crash left its last
// line half written, so the next line starts on a line of its own (the
// torn one is then skipped as unreadable).
func repairTornEnd(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		// Opened write-only: reopen to read.
		rf, err := os.Open(f.Name())
		if err != nil {
			return err
		}
		defer rf.Close()
		if _, err := rf.ReadAt(last, st.Size()-1); err != nil {
			return err
		}
	}
	if last[0] != '\n' {
		_, err = f.Write([]byte{'\n'})
	}
	return err
}

// Grades reads grades.json (the form of older runs), then grades.jsonl,
// and calls fn for the latest grade of every key. It reads grades.jsonl
// twice, keeping only the line number of each key's latest grade in memory,
// so the grades themselves are streamed. A line that does not parse (a torn
// last line after a crash) is skipped.
func (r *DirRun) Grades(ctx context.Context, fn func(transcript.TrialGrade) error) error {
	return r.grades(ctx, gradesFile, oldGradesFile, fn)
}

// grades streams the latest grade of every key of the named grades file
// and, when old is not "", of the older whole-file form.
func (r *DirRun) grades(ctx context.Context, name, oldName string, fn func(transcript.TrialGrade) error) error {
	var old struct {
		Trials []transcript.TrialGrade `json:"trials"`
	}
	if oldName != "" {
		if err := r.readJSON(oldName, &old); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	// latest maps each key to the number of its latest line in
	// grades.jsonl (from 1), or to 0 when only grades.json has it.
	latest := map[transcript.Key]int{}
	for _, g := range old.Trials {
		latest[g.Key] = 0
	}
	pass := func(fn func(n int, g transcript.TrialGrade) error) error {
		f, err := os.Open(r.path(name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		n := 0
		err = eachLine(f, func(line []byte, last bool) error {
			n++
			var g transcript.TrialGrade
			if json.Unmarshal(line, &g) != nil || g.Case == "" {
				return nil
			}
			return fn(n, g)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		return nil
	}
	// The map's keys share one copy of each case id and variant name,
	// not one per line.
	names := map[string]string{}
	intern := func(s string) string {
		if v, ok := names[s]; ok {
			return v
		}
		names[s] = s
		return s
	}
	if err := pass(func(n int, g transcript.TrialGrade) error {
		latest[transcript.Key{Case: intern(g.Case), Variant: intern(g.Variant), Trial: g.Key.Trial}] = n
		return nil
	}); err != nil {
		return err
	}
	for _, g := range old.Trials {
		if latest[g.Key] == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(g); err != nil {
				return err
			}
		}
	}
	return pass(func(n int, g transcript.TrialGrade) error {
		if latest[g.Key] != n {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(g)
	})
}

// eachLine calls fn for every non-empty line of rd, however long.
func eachLine(rd io.Reader, fn func(line []byte, last bool) error) error {
	br := bufio.NewReaderSize(rd, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(bytes.TrimRight(line, "\r\n"), err != nil); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// EncodeGrades is gs as a grade log's lines: one JSON object per grade,
// each ending in a newline, the form every store appends.
func EncodeGrades(gs []transcript.TrialGrade) ([]byte, error) {
	var b bytes.Buffer
	for _, g := range gs {
		line, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// IsRunsDir reports whether folder holds an eval's runs (ROOT/EVAL/runs):
// a folder named runs that is not itself a run.
func IsRunsDir(folder string) bool {
	if filepath.Base(filepath.Clean(folder)) != runsDir {
		return false
	}
	st, err := os.Stat(folder)
	if err != nil || !st.IsDir() {
		return false
	}
	_, err = os.Stat(filepath.Join(folder, runFile))
	return errors.Is(err, fs.ErrNotExist)
}
