package runner_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/mst-eval/mst/runner"
)

// TestIdleDeadline checks that `mst runner idle --deadline D` returns by
// itself once D has passed, with the flag before or after nothing else,
// and says so on stderr.
func TestIdleDeadline(t *testing.T) {
	t.Parallel()
	idle := runner.IdleCommand()
	for _, args := range [][]string{{"--deadline", "20ms"}, {"--deadline=1ms"}, {"-deadline", "1ns"}} {
		var stderr bytes.Buffer
		if err := idle.Run(t.Context(), args, &bytes.Buffer{}, &stderr); err != nil {
			t.Errorf("idle %q = %v, want nil at the deadline", args, err)
		}
		if !strings.Contains(stderr.String(), "deadline") {
			t.Errorf("idle %q printed %q, want it to say the deadline passed", args, stderr.String())
		}
	}
}

// TestIdleWithoutDeadline checks that plain `mst runner idle` still waits
// until it is stopped (here by its context), and that anything but
// --deadline D is refused.
func TestIdleWithoutDeadline(t *testing.T) {
	t.Parallel()
	idle := runner.IdleCommand()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- idle.Run(ctx, nil, &bytes.Buffer{}, &bytes.Buffer{}) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("idle stopped by its context = %v, want nil", err)
	}
	for _, args := range [][]string{{"now"}, {"--deadline"}, {"--deadline", "soon"}, {"--deadline", "-1s"}, {"--deadline", "1s", "extra"}, {"--grace", "1s"}} {
		if err := idle.Run(t.Context(), args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("idle %q = nil, want an error", args)
		}
	}
}
