package proctree

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
)

func TestStopMarked(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("StopMarked reads Linux's /proc")
	}
	env := "MST_EXEC=test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// Each process says when it runs its script: until a child has
	// exec'd, /proc shows its parent's environment, without the mark.
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := out.Read(make([]byte, 6)); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	polite := start("echo ready; exec sleep 600")
	// The stubborn one's trap is set before it says ready, so the signal
	// never comes before it.
	stubborn := start("trap '' TERM; echo ready; while :; do sleep 0.1; done")
	waited := make(chan error, 2)
	go func() { waited <- polite.Wait() }()
	go func() { waited <- stubborn.Wait() }()
	if err := StopMarked(t.Context(), env, 300*time.Millisecond); err != nil {
		t.Fatalf("StopMarked = %v", err)
	}
	for range 2 {
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Fatal("a marked process still runs after StopMarked")
		}
	}
	if err := StopMarked(context.Background(), env, time.Second); err != nil {
		t.Errorf("StopMarked with nothing left to stop = %v, want nil", err)
	}
}
