package run

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultOutageLimit is how long a run goes on while its store keeps no
// transcript (Options.OutageLimit).
const DefaultOutageLimit = 2 * time.Minute

// outageTrials is how many trials in a row must fail to be stored, besides
// the time, before a run stops for its store: one trial's bad luck never
// stops a run.
const outageTrials = 3

// StoreOutageError is the cause of a run stopped because its store kept no
// transcript for too long: the trials it could not keep would be lost, so
// it stops running more; what is stored is kept, and a resume runs the
// rest once the store answers again.
type StoreOutageError struct {
	Location string
	Trials   int
	For      time.Duration
}

func (e *StoreOutageError) Error() string {
	return fmt.Sprintf("the store %s kept none of the last %d trials' transcripts for %s: the run stopped rather than run trials it cannot keep", e.Location, e.Trials, e.For.Round(time.Second))
}

// outage watches whether the store keeps the run's transcripts, and stops
// the run (stop, with a StoreOutageError) once it has kept none of at
// least outageTrials trials in a row for limit. Its methods may be called
// from any goroutine.
type outage struct {
	location string
	limit    time.Duration
	now      func() time.Time
	stop     context.CancelCauseFunc

	mu      sync.Mutex
	failing int       // trials in a row not stored
	since   time.Time // when the first of them was reported
	stopped bool
}

// stored notes a trial whose transcript the store kept.
func (o *outage) stored() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.failing, o.since = 0, time.Time{}
	o.mu.Unlock()
}

// failed notes a trial whose transcript could not be stored.
func (o *outage) failed() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if o.failing == 0 {
		o.since = now
	}
	o.failing++
	if o.stopped || o.failing < outageTrials || now.Sub(o.since) < o.limit {
		return
	}
	o.stopped = true
	o.stop(&StoreOutageError{Location: o.location, Trials: o.failing, For: now.Sub(o.since)})
}
