package mcpproxy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A client that gives up on a call (its context ends) gets its answer at
// once, the server's call is cancelled too, and the set closes promptly.
func TestCancelledCall(t *testing.T) { eachFace(t, testCancelledCall) }

func testCancelledCall(t *testing.T, connect connector) {
	t.Parallel()
	marks := t.TempDir()
	set := open(t, newHost(t), "k", testServer(t, "tools", "--mark", marks))
	c := connect(t, set, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "sleep", json.RawMessage(`{"seconds":600}`))
		done <- err
	}()
	for {
		if m, _ := filepath.Glob(filepath.Join(marks, "sleep-*")); len(m) > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the call ended before it started sleeping: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	start := time.Now()
	cancel()
	err := <-done
	t.Logf("the call returned %v after its context ended: %v", time.Since(start), err)
	start = time.Now()
	c.Close()
	t.Logf("client closed in %v", time.Since(start))
	start = time.Now()
	set.Close()
	t.Logf("set closed in %v", time.Since(start))
	_ = os.Getpid()
}

// A set that closes while a call is in flight (the trial ended, its client
// did not give up the call) ends the call and closes at once: the SDK's
// server would otherwise wait for the call before it lets the session go.
func TestCloseWithCallInFlight(t *testing.T) { eachFace(t, testCloseWithCallInFlight) }

func testCloseWithCallInFlight(t *testing.T, connect connector) {
	t.Parallel()
	marks := t.TempDir()
	set := open(t, newHost(t), "k", testServer(t, "tools", "--mark", marks))
	c := connect(t, set, 0)
	called := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "sleep", json.RawMessage(`{"seconds":600}`))
		called <- err
	}()
	for {
		if m, _ := filepath.Glob(filepath.Join(marks, "sleep-*")); len(m) > 0 {
			break
		}
		select {
		case err := <-called:
			t.Fatalf("the call ended before it started sleeping: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The test's own timeout is the bound: without the cancel, Close
	// waits for the ten-minute call.
	set.Close()
	if err := <-called; err == nil {
		t.Error("the call in flight succeeded after its set closed")
	}
	ev := set.Evidence()
	if len(ev.Calls) != 1 || ev.Calls[0].Error == "" {
		t.Errorf("the cancelled call is recorded as %+v; want an error", ev.Calls)
	}
}
