//go:build unix

package clicmd

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLimit: a program that never ends (a daemon that stopped answering)
// ends the command once its limit passes, with an error that says so,
// through Run, RunWriting and RunReading; a command within its limit is
// untouched.
func TestLimit(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "hung")
	os.WriteFile(bin, []byte("#!/bin/sh\nif [ \"$1\" = quick ]; then echo done; exit 0; fi\nexec sleep 3600\n"), 0o755)
	c := &CLI{Name: "hung", Bin: bin, Limit: func(args []string) time.Duration { return 300 * time.Millisecond }}
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") {
			t.Errorf("%s of a hung program = %v, want an error saying it did not finish within 300ms", what, err)
		}
	}
	start := time.Now()
	_, err := c.Run(t.Context(), nil, "wait")
	check("Run", err)
	check("RunWriting", c.RunWriting(t.Context(), func(w io.Writer) error { return nil }, "wait"))
	check("RunReading", c.RunReading(t.Context(), func(r io.Reader) error { return nil }, "wait"))
	if took := time.Since(start); took > 3*waitDelay {
		t.Errorf("three hung commands took %s to end, want each about its limit", took)
	}
	if out, err := c.Run(t.Context(), nil, "quick"); err != nil || out != "done" {
		t.Errorf("Run(quick) = %q, %v; want done", out, err)
	}
	// A context cancelled by the caller is not called a limit.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Run(ctx, nil, "wait"); err == nil || strings.Contains(err.Error(), "did not finish within") {
		t.Errorf("Run with a cancelled context = %v, want an error that is not the limit's", err)
	}
}

func TestDefaultLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"build", "--quiet", "."}, LongLimit},
		{[]string{"image", "load"}, LongLimit},
		{[]string{"image", "inspect", "x"}, ShortLimit},
		{[]string{"load", "-i", "x.tar"}, LongLimit},
		{[]string{"run", "--rm", "--network", "none", "img"}, LongLimit},
		{[]string{"run", "-d", "img"}, ShortLimit},
		{[]string{"cp", "a", "b"}, ShortLimit},
		{[]string{"inspect", "x"}, ShortLimit},
		{nil, ShortLimit},
	} {
		if got := DefaultLimit(c.args); got != c.want {
			t.Errorf("DefaultLimit(%q) = %s, want %s", c.args, got, c.want)
		}
	}
}
