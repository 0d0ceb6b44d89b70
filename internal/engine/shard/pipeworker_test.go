package shard_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
)

// errServeReturned is what a worker line written after Serve returned
// fails with, the way a real worker's write fails once the runner has
// stopped reading its stdout.
var errServeReturned = errors.New("the coordinator stopped reading: Serve has returned")

// pipeWorker plays a worker by hand against Coordinator.Serve over two
// io.Pipe pairs: the test writes the worker's lines, and a goroutine keeps
// every line the coordinator writes back. It keeps the whole exchange in
// order, "> " for a worker line and "< " for a coordinator line, which is
// deterministic inside a synctest bubble when the test calls
// synctest.Wait between its own lines.
//
// Once Serve returns, pipeWorker does what a runner does: it closes the
// worker's stdin and stops reading the worker's stdout.
type pipeWorker struct {
	t      testing.TB
	stdout *io.PipeWriter
	served chan struct{}

	mu       sync.Mutex
	exchange []string
	received []string
	// res, err and returnedAt are set before served is closed.
	res        shard.ShardResult
	err        error
	returnedAt time.Time
}

// startServe starts c.Serve for shard index with a pipeWorker on the other
// end. A cleanup closes the worker's stdout and waits for Serve, so a test
// that stops early leaves no goroutine behind.
func startServe(t testing.TB, ctx context.Context, c *shard.Coordinator, index int, fetch shard.Fetch) *pipeWorker {
	t.Helper()
	fromWorker, toCoordinator := io.Pipe()
	fromCoordinator, toWorker := io.Pipe()
	w := &pipeWorker{t: t, stdout: toCoordinator, served: make(chan struct{})}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		s := bufio.NewScanner(fromCoordinator)
		for s.Scan() {
			w.mu.Lock()
			w.exchange = append(w.exchange, "< "+s.Text())
			w.received = append(w.received, s.Text())
			w.mu.Unlock()
		}
	}()
	go func() {
		res, err := c.Serve(ctx, index, fromWorker, toWorker, fetch)
		w.mu.Lock()
		w.res, w.err, w.returnedAt = res, err, time.Now()
		w.mu.Unlock()
		toWorker.Close()
		fromWorker.CloseWithError(errServeReturned)
		<-readDone
		close(w.served)
	}()
	t.Cleanup(func() {
		toCoordinator.Close()
		<-w.served
	})
	return w
}

// send writes one line (a newline is added) as the worker, and records it.
func (w *pipeWorker) send(line string) error {
	return w.write(line+"\n", "> "+line)
}

// write writes data as the worker and records entry in the exchange. The
// entry is recorded first, since Serve may answer before Write returns.
func (w *pipeWorker) write(data, entry string) error {
	w.note(entry)
	_, err := io.WriteString(w.stdout, data)
	return err
}

// sendMsg writes one message as the worker; a failed write fails the
// test.
func (w *pipeWorker) sendMsg(m any) {
	w.t.Helper()
	var buf bytes.Buffer
	if err := protocol.NewEncoder(&buf).Write(m); err != nil {
		w.t.Fatalf("encoding %T: %v", m, err)
	}
	if err := w.send(strings.TrimSuffix(buf.String(), "\n")); err != nil {
		w.t.Fatalf("sending %T: %v", m, err)
	}
}

// note adds a line of commentary to the exchange.
func (w *pipeWorker) note(entry string) {
	w.mu.Lock()
	w.exchange = append(w.exchange, entry)
	w.mu.Unlock()
}

// closeStdout ends the worker's stdout, as a dropped channel does.
func (w *pipeWorker) closeStdout() { w.stdout.Close() }

// returned reports whether Serve has returned.
func (w *pipeWorker) returned() bool {
	select {
	case <-w.served:
		return true
	default:
		return false
	}
}

// wait waits for Serve to return and returns what it returned.
func (w *pipeWorker) wait() (shard.ShardResult, error) {
	<-w.served
	return w.res, w.err
}

// log returns the exchange so far.
func (w *pipeWorker) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.exchange...)
}

// messages returns the coordinator's messages so far, decoded; a line that
// does not decode fails the test.
func (w *pipeWorker) messages() []any {
	w.t.Helper()
	w.mu.Lock()
	lines := append([]string(nil), w.received...)
	w.mu.Unlock()
	var ms []any
	for _, l := range lines {
		m, err := protocol.Decode([]byte(l))
		if err != nil {
			w.t.Fatalf("the coordinator wrote %q: %v", l, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// granted returns the IDs of the granted messages received so far, in
// order.
func (w *pipeWorker) granted() []int64 {
	w.t.Helper()
	var ids []int64
	for _, m := range w.messages() {
		if g, ok := m.(*protocol.Granted); ok {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// discardLogger returns a logger that drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// helloFrom is the hello of a worker running MST version mst.
func helloFrom(mst string, index int) *protocol.Hello {
	return &protocol.Hello{Protocol: protocol.Protocol, MSTVersion: mst, Shard: index, OS: "linux", Arch: "amd64"}
}

// trialEvents keeps the trials a Coordinator reports, with the bytes
// Serve fetched for each (nil when it was given no fetch).
type trialEvents struct {
	mu     sync.Mutex
	trials []*protocol.Trial
	data   [][]byte
}

func (e *trialEvents) Trial(_ int, m *protocol.Trial, data []byte) {
	e.mu.Lock()
	e.trials = append(e.trials, m)
	e.data = append(e.data, data)
	e.mu.Unlock()
}

// got returns the trials reported so far, in order.
func (e *trialEvents) got() []*protocol.Trial {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*protocol.Trial(nil), e.trials...)
}

// fetched returns the bytes reported with each trial so far, in order.
func (e *trialEvents) fetched() [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]byte(nil), e.data...)
}

// Compile-time check that trialEvents is a shard.Events.
var _ shard.Events = (*trialEvents)(nil)
