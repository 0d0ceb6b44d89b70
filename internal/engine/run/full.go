package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/ground/runlock"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// ErrStoreFull means the result store ran out of space (or quota): the run
// stopped rather than run trials whose transcripts it could not keep.
var ErrStoreFull = errors.New("the result store is full")

// StoreFullError is the write that found the store full.
type StoreFullError struct {
	Location string
	Err      error
}

func (e *StoreFullError) Error() string {
	return fmt.Sprintf("the disk that holds %s is full (%v): the run stopped, and the trials it could not store are missing", e.Location, e.Err)
}

func (e *StoreFullError) Unwrap() []error { return []error{ErrStoreFull, e.Err} }

// Self is this process as the owner of a run.
func Self(now time.Time) transcript.Owner {
	o := runlock.Self("", now)
	return transcript.Owner{PID: o.PID, Host: o.Host, Started: o.Started}
}

// fullGuard passes every write to Run, and when one fails for want of
// space it stops the run (stop) and fails with a *StoreFullError.
type fullGuard struct {
	store.Run
	stop context.CancelCauseFunc
}

func isFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func (g *fullGuard) check(err error) error {
	if err == nil || !isFull(err) {
		return err
	}
	full := &StoreFullError{Location: g.Location(), Err: err}
	g.stop(full)
	return full
}

func (g *fullGuard) WriteRun(ctx context.Context, rec transcript.Run) error {
	return g.check(g.Run.WriteRun(ctx, rec))
}

func (g *fullGuard) WriteConfig(ctx context.Context, name string, data []byte) error {
	return g.check(g.Run.WriteConfig(ctx, name, data))
}

func (g *fullGuard) WriteTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	rel, err := g.Run.WriteTranscript(ctx, t)
	return rel, g.check(err)
}

func (g *fullGuard) ReplaceTranscript(ctx context.Context, t *transcript.Transcript) (string, error) {
	rel, err := g.Run.ReplaceTranscript(ctx, t)
	return rel, g.check(err)
}

func (g *fullGuard) AppendGrades(ctx context.Context, gs ...grade.TrialGrade) error {
	return g.check(g.Run.AppendGrades(ctx, gs...))
}

func (g *fullGuard) WriteCases(ctx context.Context, cases []dataset.Case) error {
	return g.check(g.Run.WriteCases(ctx, cases))
}

func (g *fullGuard) WriteGraders(ctx context.Context, specs []json.RawMessage) error {
	return g.check(g.Run.WriteGraders(ctx, specs))
}

// EachKey gives the keys of the run's transcripts one at a time when the
// guarded store can (store.KeyWalker), so that reading a run back through
// the guard keeps the store's lean path.
func (g *fullGuard) EachKey(ctx context.Context, fn func(transcript.Key) error) error {
	return eachStoredKey(ctx, g.Run, fn)
}

// GradeHistory gives every grade of the run in order when the guarded
// store can (store.GradeHistory), and otherwise the latest of each trial,
// which is the same to a reader that lets the last grade of a trial win.
func (g *fullGuard) GradeHistory(ctx context.Context, fn func(grade.TrialGrade) error) error {
	if h, ok := g.Run.(store.GradeHistory); ok {
		return h.GradeHistory(ctx, fn)
	}
	return g.Run.Grades(ctx, fn)
}

var (
	_ store.KeyWalker    = (*fullGuard)(nil)
	_ store.GradeHistory = (*fullGuard)(nil)
)
