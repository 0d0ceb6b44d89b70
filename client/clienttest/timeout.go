package clienttest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/transcript"
)

// timeout runs a trial whose model calls the test server's sleep tool for
// ten minutes; once the call is in flight (the server marks it, an event)
// the trial's deadline passes, and Run must return within StopWithin with
// every process of the trial gone.
func (s *suite) timeout(t *testing.T) {
	marks := t.TempDir()
	srv := testServer(t, "mst", "--mark", marks)
	f := s.fake(t, one(
		providertest.Turn{ToolCalls: call("sleep", map[string]any{"seconds": 600})},
		providertest.Turn{Text: "slept"},
	))
	sess := s.mustOpen(t, s.params(t, url(f), nil, srv))

	ctx := newDeadline(t.Context())
	type out struct {
		res client.Result
		err error
	}
	ran := make(chan out, 1)
	go func() {
		res, err := sess.Run(ctx, trial("Sleep for 600 seconds"))
		ran <- out{res, err}
	}()
	// Wait for the sleep call to start: the server leaves a file.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(s.cfg.TrialTimeout)
	defer limit.Stop()
wait:
	for {
		select {
		case r := <-ran:
			t.Fatalf("Run returned before the sleep call started: err %v, outcome %+v, calls %+v", r.err, r.res.Outcome, r.res.ToolCalls)
		case <-limit.C:
			ctx.pass()
			t.Fatalf("the sleep call did not start within %v", s.cfg.TrialTimeout)
		case <-tick.C:
			if m, _ := filepath.Glob(filepath.Join(marks, "sleep-*")); len(m) > 0 {
				break wait
			}
		}
	}
	procs := trialProcesses(tagOf(srv))
	if len(procs) == 0 && hasProc() {
		t.Errorf("found no process with the server's tag %s while its call was in flight", tagOf(srv))
	}
	t.Logf("the sleep call is in flight; processes of the trial: %v", procs)
	passed := time.Now()
	ctx.pass()
	stop := time.NewTimer(s.cfg.StopWithin)
	defer stop.Stop()
	var r out
	select {
	case r = <-ran:
	case <-stop.C:
		t.Fatalf("Run did not return within %v after its deadline passed", s.cfg.StopWithin)
	}
	t.Logf("Run returned %v after its deadline: err %v, outcome %+v", time.Since(passed).Round(time.Millisecond), r.err, r.res.Outcome)
	if st := r.res.Outcome.Status; r.err == nil && (st == transcript.TimedOut || st == transcript.Cancelled) {
		t.Errorf("outcome = %+v: only MST's worker classifies a trial as timed-out or cancelled (return errored, or ctx's error)", r.res.Outcome)
	}
	if r.err == nil && r.res.Outcome.Status == transcript.Answered {
		t.Errorf("outcome = %+v after the deadline passed mid-call, want it not answered", r.res.Outcome)
	}
	if s.cfg.SessionProcesses {
		if err := sess.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}
	if left := procs.alive(); len(left) > 0 {
		when := "Run returned"
		if s.cfg.SessionProcesses {
			when = "Close returned"
		}
		t.Errorf("processes %v of the trial are still running after %s", left, when)
	}
}

// deadline is a context whose deadline passes when the test says so: a
// trial's timeout, timed by an event rather than a clock.
type deadline struct {
	context.Context
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	at   time.Time
}

func newDeadline(parent context.Context) *deadline {
	return &deadline{Context: parent, done: make(chan struct{})}
}

// pass makes the deadline pass now.
func (d *deadline) pass() {
	d.once.Do(func() {
		d.mu.Lock()
		d.at = time.Now()
		d.mu.Unlock()
		close(d.done)
	})
}

func (d *deadline) Deadline() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, !d.at.IsZero()
}

func (d *deadline) Done() <-chan struct{} { return d.done }

func (d *deadline) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (d *deadline) Value(key any) any { return d.Context.Value(key) }

func hasProc() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}
