package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// StopGrace bounds how long a command takes to end after Ctrl-C (or
// SIGTERM): the command stops its work, keeps what is stored, and says how
// to go on; what it has not done by then is abandoned, and the process
// ends with ExitInterrupted. What is stored stays stored: a run's record
// that still says running is shown interrupted, and a resume finishes it.
const StopGrace = 10 * time.Second

// cleanupGrace is how long a command's own cleanup after an interrupt (a
// run's last reads and record) may take, within StopGrace.
const cleanupGrace = 7 * time.Second

// Stopping is how a command, once interrupted, tells the process what to
// print if it must end before the command does: the command that takes
// up its work again (a run's resume command). Its methods may be called
// from any goroutine; a nil *Stopping ignores them.
type Stopping struct {
	mu   sync.Mutex
	hint string
}

// SetHint records the command that takes up the work again.
func (s *Stopping) SetHint(hint string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.hint = hint
	s.mu.Unlock()
}

// Hint is the last hint recorded.
func (s *Stopping) Hint() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hint
}

// Interrupts turns the signals on sigs into the command's end: the first
// cancels the command's context (cancel) and says so on w; a second one,
// or grace after the first, ends the process at once through exit with
// ExitInterrupted, after printing the hint the command left in s. It
// returns once finished is closed (the command returned).
func Interrupts(finished <-chan struct{}, sigs <-chan os.Signal, cancel context.CancelCauseFunc, s *Stopping, w io.Writer, grace time.Duration, exit func(int)) {
	var sig os.Signal
	select {
	case <-finished:
		return
	case sig = <-sigs:
	}
	cancel(fmt.Errorf("%w: %s", errInterrupted, sig))
	fmt.Fprintf(w, "mst: %s: stopping within %s, keeping what is stored (again to end at once)\n", sig, grace)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	why := ""
	select {
	case <-finished:
		return
	case sig = <-sigs:
		why = fmt.Sprintf("%s again: ending at once", sig)
	case <-timer.C:
		why = fmt.Sprintf("not stopped within %s: ending now", grace)
	}
	msg := "mst: " + why + "; what was stored is kept"
	if h := s.Hint(); h != "" {
		msg += "; go on with " + h
	}
	fmt.Fprintln(w, msg)
	exit(int(ExitInterrupted))
}

// errInterrupted is the cause of a command context that a signal ended.
var errInterrupted = context.Canceled
