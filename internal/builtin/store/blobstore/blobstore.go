// Package blobstore keeps runs in a bucket: Google Cloud Storage (gs://),
// Amazon S3 and S3-compatible services such as MinIO (s3://), through one
// blob API (gocloud.dev/blob). It implements store.Store and store.Run and
// passes the same conformance suite (store/storetest) as the directory
// store.
//
// A store is a bucket and a prefix; a run is every object under
//
//	PREFIX/EVAL/runs/RUN-ID/
//
// where EVAL is the eval's name (store.SafeName), and the objects under it
// have the names the files of a directory store's run folder have
// (run.json, run.prev.json, eval.yaml, cases.jsonl, graders.json,
// transcripts/VARIANT/CASE.tN.json), with two differences an object store
// forces: an object cannot be appended to, so each AppendGrades is one
// object under grades/ (its name sorts in the order written), and the
// run's lock is a series of lease objects under locks/ (see Lock).
//
// An object is written whole or not at all, so nothing is ever torn. A
// transcript is written on the condition that no object has its name yet
// (the driver's if-none-match / does-not-exist precondition): of two
// writers of one trial, one wins and the other gets store.ErrExists.
//
// Credentials come from each cloud's own chain (application default
// credentials for gs://, the AWS default chain for s3://): MST stores none
// and reads none from its config.
//
// No call to the bucket can hang: each runs under a deadline and is
// retried within it when what it met may pass, each retry reported, and a
// call that runs out fails wrapping store.ErrUnavailable (see Limits and
// calls.go). Open is bounded the same way, and Parse checks the bucket's
// name against its service's rules.
package blobstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Object names of a run that only blob stores have.
const (
	createdName = "run.created" // written once, on the condition it is not there: the run id is taken
	gradesDir   = "grades"      // one object per AppendGrades: set 1
	locksDir    = "locks"       // the lock's leases, numbered
	runsDir     = "runs"
)

// Store is a result store in a bucket. Its zero value is not usable:
// make one with New or Open.
type Store struct {
	bucket *blob.Bucket
	// base is the store's URL without its path's trailing slash:
	// scheme://bucket/prefix?query.
	base url.URL
	// prefix is the prefix of every object, "" or ending in "/".
	prefix string
	// eval is the eval whose runs Create makes; "" for a store that only
	// opens runs (Open then looks under every eval).
	eval string
	// Lease and Now rule the lock (see Lock).
	lease time.Duration
	now   func() time.Time
	// limits bound every call to the bucket; onRetry and logger hear of
	// each retry (see calls.go).
	limits  Limits
	onRetry func(Retry)
	logger  *slog.Logger
	// name is the store's URL without its query, for reports; host is
	// where its service is (for errors that do not say) and via says
	// where that address came from (" (STORAGE_EMULATOR_HOST=…)").
	name, host, via string
}

// Options tune a Store; the zero value is the default.
type Options struct {
	// Eval is the eval whose runs Create makes (its name, as in the
	// config). Open finds a run under any eval when it is "".
	Eval string
	// Lease is how long a run's lock holds without being renewed: a
	// writer whose process ended lets the run go this long after. Zero
	// means DefaultLease.
	Lease time.Duration
	// Now is the clock of leases; nil means time.Now. Tests set it.
	Now func() time.Time
	// Limits bound each call to the bucket (see Limits); the zero value
	// is the defaults.
	Limits Limits
	// OnRetry, when set, is called for each retry of a call to the
	// bucket and when a call gives up (Retry.GaveUp), from the goroutine
	// of the call: a run's progress shows it. Logger, when set, gets the
	// same as a warning. Both may be set.
	OnRetry func(Retry)
	Logger  *slog.Logger

	// gcsEndpoint, when set, is the HOST:PORT of a GCS emulator Open
	// talks to instead of STORAGE_EMULATOR_HOST's (tests, which cannot
	// set the variable in parallel).
	gcsEndpoint string
}

// DefaultLease is how long a run's lock holds without being renewed.
const DefaultLease = time.Minute

// New returns the store kept in bucket under prefix. where is the store's
// URL (scheme://bucket/prefix, with any query), as people see it; its path
// is the prefix.
func New(bucket *blob.Bucket, where *url.URL, o Options) *Store {
	s := &Store{bucket: bucket, base: *where, eval: o.Eval, lease: o.Lease, now: o.Now,
		limits: o.Limits.withDefaults(), onRetry: o.OnRetry, logger: o.Logger}
	s.name, s.host, s.via = describeEndpoint(where, o)
	s.base.Path = strings.Trim(s.base.Path, "/")
	if s.base.Path != "" {
		s.prefix = s.base.Path + "/"
		s.base.Path = "/" + s.base.Path
	}
	s.base.RawPath = ""
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Bucket is the bucket the store is kept in. Calls made on it directly
// have none of the store's deadlines or retries: use ReadObject,
// WriteObject, ObjectExists and ListObjects.
func (s *Store) Bucket() *blob.Bucket { return s.bucket }

// Location is the store's URL.
func (s *Store) Location() string { return s.base.String() }

// WithEval returns the store, making its new runs under eval.
func (s *Store) WithEval(eval string) *Store {
	c := *s
	c.eval = eval
	return &c
}

// evalPrefix is where the runs of eval are: PREFIX/EVAL/runs/.
func (s *Store) evalPrefix(eval string) string {
	return s.prefix + store.SafeName(eval) + "/" + runsDir + "/"
}

// EvalKey is the key of name among the objects of eval that are not its
// runs: PREFIX/EVAL/name (a detached run's records are under
// PREFIX/EVAL/detached/).
func (s *Store) EvalKey(eval, name string) string {
	return s.prefix + store.SafeName(eval) + "/" + name
}

// URLOf is the URL of the object key, for people.
func (s *Store) URLOf(key string) string { return s.urlOf(key) }

func checkID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) {
		return fmt.Errorf("%q is not a run id", id)
	}
	return nil
}

// Create makes the run id under the store's eval. The id is taken by a
// conditional write, so two creators of one id cannot both succeed.
func (s *Store) Create(ctx context.Context, id string, redact *secrets.Redactor) (store.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if s.eval == "" {
		return nil, errors.New("blobstore: Create needs the eval's name (Options.Eval)")
	}
	r := s.run(s.evalPrefix(s.eval)+id+"/", id, redact)
	if ok, err := s.exists(ctx, r.key(store.RunRecordName)); err != nil {
		return nil, r.fail("creating the run", err)
	} else if ok {
		return nil, fmt.Errorf("creating run %s: %s already exists", id, r.Location())
	}
	stamp, _ := json.Marshal(map[string]any{"created": s.now().UTC()})
	err := s.put(ctx, "writing", r.key(createdName), stamp, &blob.WriterOptions{IfNotExist: true, ContentType: "application/json"}, nil)
	if lost(err) {
		return nil, fmt.Errorf("creating run %s: %s already exists", id, r.Location())
	}
	if err != nil {
		return nil, r.fail("creating the run", err)
	}
	return r, nil
}

// Open opens the stored run id: under the store's eval, or, when the store
// has none, under whichever eval has it.
func (s *Store) Open(ctx context.Context, id string, redact *secrets.Redactor) (store.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var evals []string
	if s.eval != "" {
		evals = []string{s.evalPrefix(s.eval)}
	} else {
		names, err := s.evalPrefixes(ctx)
		if err != nil {
			return nil, err
		}
		evals = names
	}
	for _, p := range evals {
		r := s.run(p+id+"/", id, redact)
		ok, err := s.exists(ctx, r.key(store.RunRecordName))
		if err != nil {
			return nil, r.fail("opening the run", err)
		}
		if ok {
			return r, nil
		}
	}
	return nil, fmt.Errorf("run %s: not in %s: %w", id, s.Location(), store.ErrNotFound)
}

// evalPrefixes lists PREFIX/EVAL/runs/ for every eval in the store.
func (s *Store) evalPrefixes(ctx context.Context) ([]string, error) {
	var out []string
	err := s.list(ctx, &blob.ListOptions{Prefix: s.prefix, Delimiter: "/"}, nil, func(o *blob.ListObject) error {
		if o.IsDir {
			out = append(out, o.Key+runsDir+"/")
		}
		return nil
	})
	if err != nil {
		return nil, describe(s.Location(), "listing the store", err)
	}
	return out, nil
}

// OpenRunAt opens the run whose objects are under key (PREFIX/EVAL/runs/ID,
// with or without a trailing slash) in the store's bucket.
func (s *Store) OpenRunAt(ctx context.Context, key string, redact *secrets.Redactor) (*Run, error) {
	key = strings.Trim(key, "/") + "/"
	id := path.Base(key)
	r := s.run(key, id, redact)
	ok, err := s.exists(ctx, r.key(store.RunRecordName))
	if err != nil {
		return nil, r.fail("opening the run", err)
	}
	if !ok {
		return nil, fmt.Errorf("%s: not a run (it has no %s): %w; give a run's URL as mst run printed it, or list an eval's runs with mst report %s", r.Location(), store.RunRecordName, store.ErrNotFound, s.urlOf(path.Dir(strings.TrimSuffix(key, "/"))+"/"))
	}
	return r, nil
}

// Summary is one run as a listing shows it, as every store's listing
// does.
type Summary = store.RunSummary

// ListRuns lists the runs under key (PREFIX/EVAL/runs/), newest first
// (store.SortRuns).
func (s *Store) ListRuns(ctx context.Context, key string) ([]Summary, error) {
	key = strings.Trim(key, "/") + "/"
	if key == "/" {
		key = ""
	}
	var dirs []string
	err := s.list(ctx, &blob.ListOptions{Prefix: key, Delimiter: "/"}, nil, func(o *blob.ListObject) error {
		if o.IsDir {
			dirs = append(dirs, o.Key)
		}
		return nil
	})
	if err != nil {
		return nil, describe(s.urlOf(key), "listing runs", err)
	}
	var out []Summary
	for _, dir := range dirs {
		id := path.Base(dir)
		r := s.run(dir, id, nil)
		sum := Summary{ID: id, Location: r.Location()}
		rec, err := r.ReadRun(ctx)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // not a run (yet): a run being created, or another's object
		case err != nil:
			if ctx.Err() != nil {
				return nil, err
			}
			sum.Err = err
		default:
			sum.Record = rec
		}
		out = append(out, sum)
	}
	store.SortRuns(out)
	return out, nil
}

// urlOf is the URL of a key of the bucket.
func (s *Store) urlOf(key string) string {
	u := s.base
	u.Path = "/" + key
	u.RawPath = ""
	return u.String()
}

func (s *Store) run(prefix, id string, redact *secrets.Redactor) *Run {
	return &Run{s: s, prefix: prefix, id: id, redact: redact}
}

// Run is a run kept in a bucket.
type Run struct {
	s      *Store
	prefix string // PREFIX/EVAL/runs/ID/
	id     string
	redact *secrets.Redactor

	// mu orders this handle's grade objects.
	mu        sync.Mutex
	lastGrade int64
}

// ID is the run's id.
func (r *Run) ID() string { return r.id }

// Location is the run's URL.
func (r *Run) Location() string { return r.s.urlOf(r.prefix) }

// Key is the run's prefix in its bucket: PREFIX/EVAL/runs/ID/.
func (r *Run) Key() string { return r.prefix }

func (r *Run) key(name string) string { return r.prefix + name }

// where is the URL of one of the run's objects, for errors.
func (r *Run) where(name string) string { return r.s.urlOf(r.key(name)) }

func (r *Run) fail(doing string, err error) error {
	return describe(r.Location(), doing, err)
}

// lost says a conditional write found its object there already.
func lost(err error) bool {
	return err != nil && (code(err) == gcerrors.FailedPrecondition || code(err) == gcerrors.AlreadyExists ||
		httpStatus(err) == http.StatusPreconditionFailed)
}

// conflict says S3 refused a conditional write because another to the
// same object was in flight: it is tried again.
func conflict(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ConditionalRequestConflict")
}

// write writes one object of the run, redacted. S3's
// ConditionalRequestConflict is tried again, as every failure that may
// pass is (calls.go).
func (r *Run) write(ctx context.Context, name string, data []byte, ifNotExist bool) error {
	return r.writeWithin(ctx, "writing", name, data, ifNotExist, nil)
}

func (r *Run) writeWithin(ctx context.Context, doing, name string, data []byte, ifNotExist bool, limits *Limits) error {
	opts := &blob.WriterOptions{IfNotExist: ifNotExist, ContentType: contentType(name)}
	return r.s.put(ctx, doing, r.key(name), r.redact.Bytes(data), opts, limits)
}

func contentType(name string) string {
	switch {
	case strings.HasSuffix(name, ".json"):
		return "application/json"
	case strings.HasSuffix(name, ".jsonl"):
		return "application/jsonl"
	case strings.HasSuffix(name, ".yaml"):
		return "application/yaml"
	}
	return "application/octet-stream"
}

func (r *Run) writeJSON(ctx context.Context, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := r.write(ctx, name, append(b, '\n'), false); err != nil {
		return describe(r.where(name), "writing", err)
	}
	return nil
}

// read reads one object, failing wrapping store.ErrNotFound when it is not
// there.
func (r *Run) read(ctx context.Context, name string) ([]byte, error) {
	b, err := r.s.get(ctx, r.key(name), -1)
	if code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", r.where(name), store.ErrNotFound)
	}
	if err != nil {
		return nil, describe(r.where(name), "reading", err)
	}
	return b, nil
}

// WriteRun writes run.json, then the same record to run.prev.json.
func (r *Run) WriteRun(ctx context.Context, rec transcript.Run) error {
	if err := r.writeJSON(ctx, store.RunRecordName, rec); err != nil {
		return err
	}
	return r.writeJSON(ctx, store.PrevRunRecordName, rec)
}

// ReadRun reads run.json, or run.prev.json when run.json is damaged, and
// shows a run that says running with no live lock holder as interrupted.
func (r *Run) ReadRun(ctx context.Context) (transcript.Run, error) {
	rec, err := r.readRunObject(ctx, store.RunRecordName)
	if errors.Is(err, store.ErrDamaged) {
		prev, perr := r.readRunObject(ctx, store.PrevRunRecordName)
		if perr != nil {
			return rec, fmt.Errorf("%w; its copy %s cannot be read either (%v), so the run's record is lost: its transcripts are kept, but it cannot be reported or resumed; start a new run", err, r.where(store.PrevRunRecordName), perr)
		}
		rec = prev
		rec.Note = strings.TrimPrefix(rec.Note+"; "+store.RunRecordName+" was damaged and was read from "+store.PrevRunRecordName, "; ")
		err = nil
	}
	if err != nil {
		return rec, err
	}
	if rec.Collect == transcript.CollectRunning {
		o, live, err := r.Holder(ctx)
		if err != nil {
			return rec, err
		}
		rec = store.MarkInterrupted(rec, o, live)
	}
	return rec, nil
}

func (r *Run) readRunObject(ctx context.Context, name string) (transcript.Run, error) {
	b, err := r.s.get(ctx, r.key(name), store.MaxRunRecordBytes)
	if code(err) == gcerrors.NotFound {
		return transcript.Run{}, fmt.Errorf("%s: %w", r.where(name), store.ErrNotFound)
	}
	if err != nil {
		return transcript.Run{}, describe(r.where(name), "reading", err)
	}
	return store.DecodeRunRecord(b, r.where(name))
}

// WriteConfig writes eval.yaml (or eval.json, after name's extension).
func (r *Run) WriteConfig(ctx context.Context, name string, data []byte) error {
	n := store.ConfigName(name)
	if err := r.write(ctx, n, data, false); err != nil {
		return describe(r.where(n), "writing", err)
	}
	return nil
}

// WriteCases writes cases.jsonl.
func (r *Run) WriteCases(ctx context.Context, cases []transcript.Case) error {
	b, err := store.EncodeCases(cases)
	if err != nil {
		return err
	}
	if err := r.write(ctx, store.CasesName, b, false); err != nil {
		return describe(r.where(store.CasesName), "writing", err)
	}
	return nil
}

// ReadCases reads cases.jsonl.
func (r *Run) ReadCases(ctx context.Context) ([]transcript.Case, error) {
	b, err := r.read(ctx, store.CasesName)
	if err != nil {
		return nil, err
	}
	return store.DecodeCases(bytes.NewReader(b), r.where(store.CasesName))
}

// WriteGraders writes graders.json.
func (r *Run) WriteGraders(ctx context.Context, specs []json.RawMessage) error {
	if specs == nil {
		specs = []json.RawMessage{}
	}
	return r.writeJSON(ctx, store.GradersName, specs)
}

// ReadGraders reads graders.json; a run without one has no graders.
func (r *Run) ReadGraders(ctx context.Context) ([]json.RawMessage, error) {
	b, err := r.read(ctx, store.GradersName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var specs []json.RawMessage
	if err := json.Unmarshal(b, &specs); err != nil {
		return nil, fmt.Errorf("%s: %w", r.where(store.GradersName), err)
	}
	return specs, nil
}

func (r *Run) encodeTranscript(t *transcript.Transcript) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteTranscript writes the transcript's object on the condition that it
// is not there: of two writers, one wins and the other gets
// store.ErrExists. An object there that is not a whole transcript is
// replaced.
func (r *Run) WriteTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	rel := store.TranscriptPath(t.Key)
	b, err := r.encodeTranscript(t)
	if err != nil {
		return "", err
	}
	err = r.write(ctx, rel, b, true)
	if lost(err) {
		if _, rerr := r.readTranscript(ctx, rel); errors.Is(rerr, store.ErrDamaged) {
			return rel, r.describeWrite(rel, r.write(ctx, rel, b, false))
		}
		return "", fmt.Errorf("%s: %w", r.where(rel), store.ErrExists)
	}
	if err != nil {
		return "", r.describeWrite(rel, err)
	}
	return rel, nil
}

func (r *Run) describeWrite(rel string, err error) error {
	if err == nil {
		return nil
	}
	return describe(r.where(rel), "writing", err)
}

// ReplaceTranscript writes the transcript's object, replacing any.
func (r *Run) ReplaceTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	rel := store.TranscriptPath(t.Key)
	b, err := r.encodeTranscript(t)
	if err != nil {
		return "", err
	}
	return rel, r.describeWrite(rel, r.write(ctx, rel, b, false))
}

// ReadTranscript reads the transcript of key.
func (r *Run) ReadTranscript(ctx context.Context, key transcript.Key) (*transcript.Transcript, error) {
	t, err := r.readTranscript(ctx, store.TranscriptPath(key))
	if err != nil && errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrDamaged) {
		return nil, fmt.Errorf("transcript of %s: %w", key, store.ErrNotFound)
	}
	return t, err
}

func (r *Run) readTranscript(ctx context.Context, rel string) (*transcript.Transcript, error) {
	b, err := r.read(ctx, rel)
	if err != nil {
		return nil, err
	}
	return store.DecodeTranscript(b, r.where(rel))
}

// walk calls fn with the key and name of every transcript object.
func (r *Run) walk(ctx context.Context, fn func(k transcript.Key, rel string) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	seen := map[transcript.Key]bool{}
	var fnErr error
	err := r.s.list(ctx, &blob.ListOptions{Prefix: r.key(store.TranscriptsName + "/")}, nil, func(o *blob.ListObject) error {
		fnErr = r.walkOne(ctx, o, seen, fn)
		return fnErr
	})
	switch {
	case err == nil:
		return nil
	case fnErr != nil:
		return fnErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return r.fail("listing transcripts", err)
}

func (r *Run) walkOne(ctx context.Context, o *blob.ListObject, seen map[transcript.Key]bool, fn func(k transcript.Key, rel string) error) error {
	if o.IsDir || o.Size < 2 {
		return nil // an empty object is no transcript
	}
	rel := strings.TrimPrefix(o.Key, r.prefix)
	k, ok, cut := store.TranscriptKey(rel)
	if !ok && cut {
		// A name cut to fit: the transcript says whose it is.
		if fk, err := r.readKey(ctx, rel); err == nil && store.TranscriptPath(fk) == rel {
			k, ok = fk, true
		}
	}
	if !ok || seen[k] {
		return nil
	}
	seen[k] = true
	return fn(k, rel)
}

// readKey reads the key of a transcript from its first bytes.
func (r *Run) readKey(ctx context.Context, rel string) (transcript.Key, error) {
	b, err := r.s.getRange(ctx, r.key(rel), 0, 4096)
	if err != nil {
		return transcript.Key{}, err
	}
	return store.ReadKey(bytes.NewReader(b))
}

// Keys lists the transcripts' keys from their names, reading the key from
// the transcript only where its name was cut to fit.
func (r *Run) Keys(ctx context.Context) ([]transcript.Key, error) {
	var keys []transcript.Key
	err := r.walk(ctx, func(k transcript.Key, _ string) error {
		keys = append(keys, k)
		return nil
	})
	return keys, err
}

// Transcripts reads every transcript, one at a time.
func (r *Run) Transcripts(ctx context.Context, fn func(*transcript.Transcript) error) error {
	return r.walk(ctx, func(_ transcript.Key, rel string) error {
		t, err := r.readTranscript(ctx, rel)
		if errors.Is(err, store.ErrNotFound) {
			return nil // damaged, or gone since listed: as if not stored
		}
		if err != nil {
			return err
		}
		return fn(t)
	})
}

// AppendGrades writes the grades as one new object under grades/.
func (r *Run) AppendGrades(ctx context.Context, gs ...transcript.TrialGrade) error {
	return r.appendGrades(ctx, gradesDir, gs)
}

// appendGrades writes gs as one object under dir, named so that objects
// sort in the order they were written: the time in nanoseconds (never
// less than this handle's last), then random bytes so two handles never
// take one name.
func (r *Run) appendGrades(ctx context.Context, dir string, gs []transcript.TrialGrade) error {
	if len(gs) == 0 {
		return nil
	}
	lines, err := store.EncodeGrades(gs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	n := max(r.s.now().UnixNano(), r.lastGrade+1)
	r.lastGrade = n
	r.mu.Unlock()
	var tag [4]byte
	rand.Read(tag[:])
	name := fmt.Sprintf("%s/%020d-%s.jsonl", dir, n, hex.EncodeToString(tag[:]))
	if err := r.write(ctx, name, lines, true); err != nil {
		return describe(r.where(name), "appending grades", err)
	}
	return nil
}

// Grades calls fn for the latest grade of every key: it reads the grade
// objects twice, keeping in memory only where each key's latest grade is.
func (r *Run) Grades(ctx context.Context, fn func(transcript.TrialGrade) error) error {
	return r.grades(ctx, gradesDir, fn)
}

func (r *Run) grades(ctx context.Context, dir string, fn func(transcript.TrialGrade) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var names []string
	err := r.s.list(ctx, &blob.ListOptions{Prefix: r.key(dir + "/")}, nil, func(o *blob.ListObject) error {
		if !o.IsDir && strings.HasSuffix(o.Key, ".jsonl") {
			names = append(names, o.Key)
		}
		return nil
	})
	if err != nil {
		return r.fail("listing grades", err)
	}
	slices.Sort(names)
	type at struct{ obj, line int }
	latest := map[transcript.Key]at{}
	pass := func(fn func(a at, g transcript.TrialGrade) error) error {
		for i, name := range names {
			b, err := r.s.get(ctx, name, -1)
			if code(err) == gcerrors.NotFound {
				continue
			}
			if err != nil {
				return describe(r.s.urlOf(name), "reading grades", err)
			}
			n := 0
			err = store.EachLine(bytes.NewReader(b), func(line []byte) error {
				n++
				var g transcript.TrialGrade
				if json.Unmarshal(line, &g) != nil || g.Case == "" {
					return nil
				}
				return fn(at{i, n}, g)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := pass(func(a at, g transcript.TrialGrade) error {
		latest[g.Key] = a
		return nil
	}); err != nil {
		return err
	}
	return pass(func(a at, g transcript.TrialGrade) error {
		if latest[g.Key] != a {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(g)
	})
}

var (
	_ store.Store = (*Store)(nil)
	_ store.Run   = (*Run)(nil)
)
