package cli

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/internal/builtin"
)

// signalWriter is a log destination that closes seen when a line holding
// want is written.
type signalWriter struct {
	want string
	seen chan struct{}
	once sync.Once
	mu   sync.Mutex
	b    strings.Builder
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// A credential store mst opens says, as a warning, when it waits for
// another holder of a server's lock, naming the server: without it a
// second mst auth or run looks hung.
func TestCredentialLockWaitIsSaid(t *testing.T) {
	f := &storeFlags{name: "local", parts: builtin.Builtin(), options: []string{"dir=" + filepath.Join(t.TempDir(), "credentials")}}
	w := &signalWriter{want: "waiting for another mst", seen: make(chan struct{})}
	holder, _, err := f.open(t.Context(), newLogger(&strings.Builder{}, false))
	if err != nil {
		t.Fatal(err)
	}
	waiter, _, err := f.open(t.Context(), newLogger(w, false))
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- holder.WithLock(t.Context(), "notes", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- waiter.WithLock(ctx, "notes", func(context.Context) error { return nil }) }()
	select {
	case <-w.seen:
	case err := <-waited:
		t.Fatalf("WithLock returned (%v) while another held the lock", err)
	}
	cancel()
	<-waited
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if line := w.b.String(); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "server=notes") {
		t.Errorf("the wait is said as %q; want a warning naming the server", line)
	}
}
