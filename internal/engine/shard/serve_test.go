package shard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/transcript"
)

// TestServeUnknownType checks that Serve keeps the decoder's typed error
// for a message type it does not know, so a caller can tell a worker that
// spoke another protocol from one whose channel dropped.
func TestServeUnknownType(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &shard.Coordinator{MSTVersion: "test", Logger: discardLogger()}
		w := startServe(t, t.Context(), c, 0, nil)
		w.sendMsg(helloFrom("test", 0))
		if err := w.send(`{"type":"teleport"}`); err != nil {
			t.Fatal(err)
		}
		_, err := w.wait()
		if !errors.Is(err, protocol.ErrUnknownMessage) {
			t.Errorf("Serve(a teleport line) = %v, want an error wrapping ErrUnknownMessage", err)
		}
	})
}

// TestServeFetchAfterInterrupt checks that a trial reported after the run
// was interrupted is still copied back and reported. When ctx ends, Serve
// sends cancel and goes on reading until done; the trials the worker
// reports meanwhile (one that had just finished, one that ended as
// cancelled) have transcripts worth keeping, so their copy must not run on
// the context that just ended. The fetch here fails on an ended context,
// as a copy through exec.CommandContext (docker cp, gcloud scp) does.
func TestServeFetchAfterInterrupt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &trialEvents{}
		c := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: discardLogger()}
		ctx, interrupt := context.WithCancel(t.Context())
		defer interrupt()
		fetch := func(ctx context.Context, path string) ([]byte, error) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("copying %s back: %w", path, err)
			}
			return []byte(path), nil
		}
		w := startServe(t, ctx, c, 0, fetch)
		w.sendMsg(helloFrom("test", 0))
		keys := []transcript.Key{{Case: "finished", Variant: "v", Trial: 1}, {Case: "in-flight", Variant: "v", Trial: 1}}
		for i, k := range keys {
			w.sendMsg(&protocol.Acquire{ID: int64(i + 1), Key: k})
		}
		synctest.Wait()
		interrupt()
		synctest.Wait()
		w.sendMsg(&protocol.Trial{Acquire: 1, Key: keys[0], Status: transcript.Answered, Path: "transcripts/v/finished.t1.json"})
		w.sendMsg(&protocol.Trial{Acquire: 2, Key: keys[1], Status: transcript.Cancelled, Path: "transcripts/v/in-flight.t1.json"})
		w.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: 2, Answered: 1, Cancelled: 1}, CleanupOK: true})
		if _, err := w.wait(); err != nil {
			t.Fatalf("Serve(interrupted, then done) = %v, want no error", err)
		}
		var got []string
		for _, m := range ev.got() {
			got = append(got, m.Key.Case)
		}
		if want := []string{"finished", "in-flight"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("Serve(interrupted, then two trials) reported %q, want %q: the copies ran on the ended context and failed", got, want)
		}
	})
}

// leakLabel is the pprof label TestServeEndsItsGoroutines puts on Serve's
// goroutines, to find them among every other test's.
const leakLabel = "mst-shard-test"

// TestServeEndsItsGoroutines checks that no goroutine Serve started
// outlives it once the runner has closed both ends of the channel. Here
// the worker's hello (from another MST) and the acquire it sends right
// behind it arrive in one read; Serve refuses the hello and returns while
// its reading goroutine already holds the acquire.
//
// Goroutines inherit pprof labels, so the test finds Serve's goroutines by
// the label it runs Serve under, and polls the goroutine profile until they
// are gone (at most a few seconds), the way leak checkers do.
func TestServeEndsItsGoroutines(t *testing.T) {
	t.Parallel()
	label := t.Name()
	fromWorker, toCoordinator := io.Pipe()
	fromCoordinator, toWorker := io.Pipe()
	go io.Copy(io.Discard, fromCoordinator)
	c := &shard.Coordinator{MSTVersion: "test", Logger: discardLogger()}
	errc := make(chan error, 1)
	pprof.Do(t.Context(), pprof.Labels(leakLabel, label), func(ctx context.Context) {
		go func() {
			_, err := c.Serve(ctx, 0, fromWorker, toWorker, nil)
			errc <- err
		}()
	})
	var lines bytes.Buffer
	enc := protocol.NewEncoder(&lines)
	enc.Write(helloFrom("0.9.0", 0))
	enc.Write(&protocol.Acquire{ID: 1, Key: transcript.Key{Case: "c", Variant: "v", Trial: 1}})
	if _, err := toCoordinator.Write(lines.Bytes()); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if err == nil {
		t.Fatal("Serve(a hello from MST 0.9.0) = nil, want a version mismatch")
	}
	// What a runner does once Serve has returned.
	toWorker.Close()
	fromWorker.Close()
	toCoordinator.Close()
	n, stacks := labelledGoroutines(label)
	for deadline := time.Now().Add(5 * time.Second); n > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		n, stacks = labelledGoroutines(label)
	}
	if n > 0 {
		t.Errorf("Serve(a hello from MST 0.9.0, then acquire) returned %q and left %d goroutines running, want none:\n%s", err, n, stacks)
	}
}

// labelledGoroutines returns how many goroutines carry leakLabel=value,
// with their stacks.
func labelledGoroutines(value string) (int, string) {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	want := strconv.Quote(leakLabel) + ":" + strconv.Quote(value)
	// The first line is the profile's title; records are separated by a
	// blank line and start with "count @ pc…".
	_, body, _ := strings.Cut(buf.String(), "\n")
	n := 0
	var stacks strings.Builder
	for _, record := range strings.Split(body, "\n\n") {
		header, rest, _ := strings.Cut(record, "\n")
		if !strings.Contains(rest, "# labels: ") || !strings.Contains(rest, want) {
			continue
		}
		count, _, _ := strings.Cut(header, " ")
		if c, err := strconv.Atoi(count); err == nil {
			n += c
		}
		stacks.WriteString(record + "\n\n")
	}
	return n, stacks.String()
}

// TestServeRefusesPathsOutsideResults checks that a worker naming a file
// outside its results folder (.., an absolute path) gets nothing fetched:
// the trial stays missing, and the room it held is given back.
func TestServeRefusesPathsOutsideResults(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &trialEvents{}
		c := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: discardLogger()}
		var fetched []string
		fetch := func(ctx context.Context, path string) ([]byte, error) {
			fetched = append(fetched, path)
			return []byte("{}"), nil
		}
		w := startServe(t, t.Context(), c, 0, fetch)
		w.sendMsg(helloFrom("test", 0))
		bad := []string{"../../etc/passwd", "/etc/passwd", "transcripts/../../x.json", "transcripts//v/x.json"}
		for i, p := range bad {
			k := transcript.Key{Case: fmt.Sprint("c", i), Variant: "v", Trial: 1}
			w.sendMsg(&protocol.Acquire{ID: int64(i + 1), Key: k})
			synctest.Wait()
			w.sendMsg(&protocol.Trial{Acquire: int64(i + 1), Key: k, Status: transcript.Answered, Path: p})
		}
		w.sendMsg(&protocol.Done{Counts: transcript.Counts{Planned: len(bad)}, CleanupOK: true})
		if _, err := w.wait(); err != nil {
			t.Fatalf("Serve(trials with paths outside the results) = %v, want no error", err)
		}
		if len(fetched) != 0 || len(ev.got()) != 0 {
			t.Errorf("Serve fetched %q and reported %d trials, want nothing for paths %q", fetched, len(ev.got()), bad)
		}
	})
}
