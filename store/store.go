// Package store keeps runs: run.json, the eval config as it was, the cases,
// the graders, one transcript per trial and the grades. Store and Run are the
// seam: nothing outside this package knows how a run is laid out, so a
// result store in a bucket is one more implementation of the same two
// interfaces, checked by the same conformance suite (store/storetest).
//
// The directory store (Dir) is the first implementation: a folder per run.
// Its writes are atomic and durable (a temporary file synced, then renamed
// or linked into place, then the folder synced), so a crash leaves the old
// file or the new one, never half of one; grades are appended a line at a
// time and synced, and a torn last line is ignored when read. A transcript
// left short anyway (by an older MST, or a file system that lost it) counts
// as missing. A run has one writer at a time: the process that holds the
// lock of its folder (see Lock).
//
// Every write through a Run passes through the Redactor it was opened with,
// so no secret value reaches what is stored. Reads return what was stored.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// ErrExists means a transcript for that trial is already stored: a trial's
// transcript is written once, and only ReplaceTranscript replaces it.
var ErrExists = errors.New("a transcript for this trial is already stored")

// ErrNotFound means the run, or the trial's transcript, is not stored. A
// transcript that is not whole (a crash or a power cut cut it short) is
// not stored either: Keys and Transcripts leave it out, ReadTranscript
// fails wrapping ErrNotFound and ErrDamaged, and WriteTranscript replaces
// it.
var ErrNotFound = errors.New("not stored")

// ErrDamaged means what is stored cannot be read back whole.
var ErrDamaged = errors.New("damaged")

// ErrBusy means another process writes the run: a run has one writer.
var ErrBusy = errors.New("the run is being written by another process")

// ErrBadLocation means a location names no store or run MST can use: a
// URL it cannot read, or a store where a run was asked for. The error says
// what to give instead.
var ErrBadLocation = errors.New("not a location MST can use")

// BadLocation marks err, which says what is wrong with a location, as
// ErrBadLocation, keeping its text.
func BadLocation(err error) error { return badLocation{err} }

type badLocation struct{ error }

func (e badLocation) Unwrap() []error { return []error{e.error, ErrBadLocation} }

// ErrUnavailable means the store did not answer: a call to it ran out of
// time or of retries (connections refused or cut, the service answering
// 5xx or 429, no answer at all). What was asked may or may not have been
// done; asking again once the store answers is safe.
var ErrUnavailable = errors.New("store not answering")

// BusyError names the process that owns a run someone else wanted to
// write.
type BusyError struct {
	// Location is the run's (or shard folder's) location.
	Location string
	// Owner is who holds it; zero when it has not said yet.
	Owner transcript.Owner
}

func (e *BusyError) Error() string {
	who := "another process"
	if e.Owner.PID != 0 {
		who = e.Owner.String()
	}
	return fmt.Sprintf("%s is in use by %s: a run has one writer; wait for that process to end, or stop it, then try again", e.Location, who)
}

func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Store holds runs by id.
//
// Create and Open may be called from any goroutine.
type Store interface {
	// Create makes a new, empty run named id; it fails when id is taken.
	// Every write to the run is redacted with redact (nil: none).
	Create(ctx context.Context, id string, redact *secrets.Redactor) (Run, error)
	// Open returns the stored run named id, or an error wrapping
	// ErrNotFound.
	Open(ctx context.Context, id string, redact *secrets.Redactor) (Run, error)
	// Location says where the store is, for people (a folder, a URL).
	Location() string
}

// WriteChecker is a Run that can check, before any trial, that this
// machine's identity may write transcripts to it: a bucket's permissions,
// which a worker on another machine checks for its own credentials.
type WriteChecker interface {
	CheckWrite(ctx context.Context) error
}

// Remote is a Run kept outside the coordinator's folders (a bucket), so
// the workers of machine runners write its transcripts there themselves.
type Remote interface {
	Remote() bool
}

// Run is one stored run. Its methods may be called from several goroutines
// at once.
type Run interface {
	// ID is the run's id (its folder's name for the directory store).
	ID() string
	// Location says where the run is, for people: a folder path or a URL.
	Location() string

	// Lock makes owner the run's one writer until release is called or
	// the owner's process ends, however it ends. It fails with a
	// *BusyError (errors.Is ErrBusy) naming the owner when another holds
	// the run; it never waits.
	Lock(ctx context.Context, owner transcript.Owner) (release func() error, err error)
	// Holder says whether a live process holds the run, and which one
	// (the last one when none does).
	Holder(ctx context.Context) (owner transcript.Owner, live bool, err error)

	// WriteRun stores the run record, replacing the one stored atomically.
	WriteRun(ctx context.Context, rec transcript.Run) error
	// ReadRun reads the run record, accepting older versions. A record
	// that says running while no live process holds the run is returned
	// with Collect set to interrupted. A damaged record is recovered from
	// the previous one when the store has it; otherwise the error wraps
	// ErrDamaged and says what is wrong.
	ReadRun(ctx context.Context) (transcript.Run, error)
	// WriteConfig stores a copy of the eval config file the run was made
	// from; name is its base name, whose extension is kept (.yaml, .json).
	WriteConfig(ctx context.Context, name string, data []byte) error
	// WriteCases stores the run's cases, as loaded; ReadCases reads them.
	WriteCases(ctx context.Context, cases []transcript.Case) error
	ReadCases(ctx context.Context) ([]transcript.Case, error)
	// WriteGraders stores the eval's graders as written (raw specs);
	// ReadGraders reads them (none for a run that stored none).
	WriteGraders(ctx context.Context, specs []json.RawMessage) error
	ReadGraders(ctx context.Context) ([]json.RawMessage, error)

	// WriteTranscript stores t under its key and returns where, as a
	// slash-separated path relative to the run (what a worker reports in
	// its trial message). It fails with ErrExists when the trial already
	// has a transcript.
	WriteTranscript(ctx context.Context, t *transcript.Transcript) (string, error)
	// ReplaceTranscript stores t under its key, replacing any transcript
	// the trial had (a resumed run's errored or cancelled trial).
	ReplaceTranscript(ctx context.Context, t *transcript.Transcript) (string, error)
	// ReadTranscript reads the transcript of key, or fails wrapping
	// ErrNotFound.
	ReadTranscript(ctx context.Context, key transcript.Key) (*transcript.Transcript, error)
	// Keys lists the trials that have a transcript, without reading them.
	Keys(ctx context.Context) ([]transcript.Key, error)
	// Transcripts calls fn for every stored transcript, one at a time, so
	// memory stays flat however many there are. An error from fn stops it.
	Transcripts(ctx context.Context, fn func(*transcript.Transcript) error) error

	// AppendGrades adds grades to the run's grades. A later grade of a key
	// replaces an earlier one.
	AppendGrades(ctx context.Context, gs ...transcript.TrialGrade) error
	// Grades calls fn for the latest grade of every graded key, streaming:
	// grades of older runs are read as the new.
	Grades(ctx context.Context, fn func(transcript.TrialGrade) error) error
}
