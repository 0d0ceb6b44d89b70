// Package store keeps runs: run.json, the eval config as it was, the cases,
// the graders, one transcript per trial and the grades. Store and Run are the
// seam: nothing outside this package knows how a run is laid out, so a
// result store in a bucket is one more implementation of the same two
// interfaces, checked by the same conformance suite (store/storetest).
//
// The directory store (Dir) is the first implementation: a folder per run.
// Its writes are atomic (a temporary file renamed, or linked, into place),
// so a crash leaves the old file or the new one, never half of one; grades
// are appended a line at a time, and a torn last line is ignored when read.
//
// Every write through a Run passes through the Redactor it was opened with,
// so no secret value reaches what is stored. Reads return what was stored.
package store

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// ErrExists means a transcript for that trial is already stored: a trial's
// transcript is written once, and only ReplaceTranscript replaces it.
var ErrExists = errors.New("a transcript for this trial is already stored")

// ErrNotFound means the run, or the trial's transcript, is not stored.
var ErrNotFound = errors.New("not stored")

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

// Run is one stored run. Its methods may be called from several goroutines
// at once.
type Run interface {
	// ID is the run's id (its folder's name for the directory store).
	ID() string
	// Location says where the run is, for people: a folder path or a URL.
	Location() string

	// WriteRun stores the run record, replacing the one stored atomically.
	WriteRun(ctx context.Context, rec transcript.Run) error
	// ReadRun reads the run record, accepting older versions.
	ReadRun(ctx context.Context) (transcript.Run, error)
	// WriteConfig stores a copy of the eval config file the run was made
	// from; name is its base name, whose extension is kept (.yaml, .json).
	WriteConfig(ctx context.Context, name string, data []byte) error
	// WriteCases stores the run's cases, as loaded; ReadCases reads them.
	WriteCases(ctx context.Context, cases []dataset.Case) error
	ReadCases(ctx context.Context) ([]dataset.Case, error)
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
	AppendGrades(ctx context.Context, gs ...grade.TrialGrade) error
	// Grades calls fn for the latest grade of every graded key, streaming:
	// grades of older runs are read as the new.
	Grades(ctx context.Context, fn func(grade.TrialGrade) error) error
}
