//go:build unix

package cliproc

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
)

func TestEnv(t *testing.T) {
	t.Setenv("PATH", "/usr/bin")
	t.Setenv("CLIPROC_KEPT", "mst")
	t.Setenv("CLIPROC_DROPPED", "mst")
	bin := filepath.Join("/opt", "cli", "bin", "codex")
	got := Env(bin, []string{"CLIPROC_KEPT", "CLIPROC_UNSET"},
		map[string]string{"HOME": "/session", "CLIPROC_KEPT": "variant"},
		map[string]string{"HOME": "/trial", "KEY": "k"})
	want := []string{"CLIPROC_KEPT=variant", "HOME=/trial", "KEY=k", "PATH=/opt/cli/bin" + string(filepath.ListSeparator) + "/usr/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("Env(%s, …) = %q, want %q", bin, got, want)
	}
}

// session is a client.Session that does nothing.
type session struct{}

func (*session) Run(context.Context, client.Trial) (client.Result, error) {
	return client.Result{}, nil
}
func (*session) Reset(context.Context) error { return nil }
func (*session) Close() error                { return nil }

func TestOpen(t *testing.T) {
	t.Parallel()
	prog := Program{Client: "test-cli", What: "the test CLI", Setup: "install it",
		Command: func(options json.RawMessage) (string, error) { return string(options), nil }}
	failed := errors.New("open failed")
	tests := []struct {
		name        string
		command     string
		open        func(context.Context, client.OpenParams, string) (*session, error)
		wantSession bool
		wantErr     string
	}{
		{"found", "sh", func(_ context.Context, _ client.OpenParams, bin string) (*session, error) {
			if !filepath.IsAbs(bin) {
				return nil, errors.New("bin " + bin + " is not absolute")
			}
			return &session{}, nil
		}, true, ""},
		{"missing", "/nonexistent/test-cli", nil, false, "test-cli: the test CLI (/nonexistent/test-cli) was not found"},
		{"nil session", "sh", func(context.Context, client.OpenParams, string) (*session, error) { return nil, failed }, false, failed.Error()},
		{"session to close", "sh", func(context.Context, client.OpenParams, string) (*session, error) { return &session{}, failed }, true, failed.Error()},
	}
	for _, tt := range tests {
		s, err := Open(t.Context(), client.OpenParams{Options: json.RawMessage(tt.command)}, prog, tt.open)
		if (s != nil) != tt.wantSession {
			t.Errorf("%s: Open returned session %v, want one: %v", tt.name, s, tt.wantSession)
		}
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: Open error = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

// TestStopWhen: a Process whose StopWhen reports true after the first line
// is stopped then, so a program that would go on for ten minutes ends, and
// no line after the stop is handed on.
func TestStopWhen(t *testing.T) {
	t.Parallel()
	var lines []string
	p, err := Start(t.Context(), Command{
		Path: "/bin/sh", Args: []string{"-c", "echo one; exec sleep 600; echo two"},
		Line:     func(_ time.Time, text []byte) { lines = append(lines, string(text)) },
		StopWhen: func() bool { return len(lines) > 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err == nil {
		t.Errorf("Wait = nil, want the program's end by a signal")
	}
	if !p.Stopped() || !slices.Equal(lines, []string{"one"}) {
		t.Errorf("Stopped() = %v, lines %q; want stopped after one", p.Stopped(), lines)
	}
}
