package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestInterrupts: the first signal cancels the command and says so; a
// second one ends the process at once, and so does StopGrace passing, each
// printing the hint the command left; a command that ends in time ends it
// without an exit.
func TestInterrupts(t *testing.T) {
	t.Parallel()
	type result struct {
		exited  int // -1: no exit
		elapsed time.Duration
		out     string
		cause   error
	}
	run := func(t *testing.T, second bool, commandEnds time.Duration) result {
		var res result
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			sigs := make(chan os.Signal, 2)
			stop := new(Stopping)
			stop.SetHint("mst run --resume /r/x")
			var mu sync.Mutex
			var out bytes.Buffer
			w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
			res.exited = -1
			start := time.Now()
			finished, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				Interrupts(finished, sigs, cancel, stop, w, StopGrace, func(code int) { res.exited = code; res.elapsed = time.Since(start) })
			}()
			sigs <- syscall.SIGINT
			<-ctx.Done()
			res.cause = context.Cause(ctx)
			if second {
				sigs <- syscall.SIGINT
			}
			if commandEnds > 0 {
				time.Sleep(commandEnds) // the fake clock: the command's own time to stop
				close(finished)
			}
			<-done
			mu.Lock()
			res.out = out.String()
			mu.Unlock()
		})
		return res
	}
	t.Run("second signal", func(t *testing.T) {
		r := run(t, true, 0)
		if r.exited != int(ExitInterrupted) || r.elapsed != 0 || !strings.Contains(r.out, "again: ending at once") || !strings.Contains(r.out, "go on with mst run --resume /r/x") {
			t.Errorf("after two signals: exit %d after %s, said %q; want %d at once, with the hint", r.exited, r.elapsed, r.out, ExitInterrupted)
		}
		if !errors.Is(r.cause, context.Canceled) || !strings.Contains(r.out, "stopping within 10s") {
			t.Errorf("the first signal: cause %v, said %q; want a cancel, and the bound said", r.cause, r.out)
		}
	})
	t.Run("grace passes", func(t *testing.T) {
		r := run(t, false, 0)
		if r.exited != int(ExitInterrupted) || r.elapsed != StopGrace || !strings.Contains(r.out, "not stopped within 10s") || !strings.Contains(r.out, "/r/x") {
			t.Errorf("a command that does not stop: exit %d after %s, said %q; want %d after %s, with the hint", r.exited, r.elapsed, r.out, ExitInterrupted, StopGrace)
		}
	})
	t.Run("command ends in time", func(t *testing.T) {
		r := run(t, false, 3*time.Second)
		if r.exited != -1 || strings.Contains(r.out, "ending") {
			t.Errorf("a command that stops in 3s: exit %d, said %q; want no exit", r.exited, r.out)
		}
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
