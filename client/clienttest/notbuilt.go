package clienttest

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
)

// RunNotBuilt checks a definition this build describes but refuses
// (client.NotYetBuilt): Available refuses every OS the definition names,
// and others, with a message that names the client; Open, should a caller
// skip Available, fails without a session; Preflight, if any, and Close of
// nothing do not panic.
func RunNotBuilt(t *testing.T, d *client.Definition) {
	t.Helper()
	if d.Available == nil {
		t.Fatalf("%s: Available is nil, so the eval loader would accept it", d.Name)
	}
	goos := append([]string{"linux", "darwin", "windows"}, d.Requirements.OS...)
	for _, os := range goos {
		err := d.Available(os)
		if err == nil || !strings.Contains(err.Error(), d.Name) {
			t.Errorf("%s: Available(%q) = %v, want an error that names the client", d.Name, os, err)
		}
	}
	if d.Open == nil && d.Run == nil {
		t.Fatalf("%s has neither Open nor Run", d.Name)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s: Open panicked: %v", d.Name, r)
			}
		}()
		p := client.OpenParams{Variant: "v", Model: "anthropic/claude-test-1", Options: []byte(`{}`),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: t.TempDir()}
		if d.Open != nil {
			s, err := d.Open(context.Background(), p)
			if err == nil || strings.TrimSpace(err.Error()) == "" {
				t.Errorf("%s: Open = %v, want an error saying why", d.Name, err)
			}
			if s != nil {
				t.Errorf("%s: Open returned a session with its error", d.Name)
				s.Close()
			}
		}
		if d.Preflight != nil {
			d.Preflight([]byte(`{}`))
		}
	}()
	if len(d.Options) > 0 {
		if _, err := client.DescribeOptions(d.Options); err != nil {
			t.Errorf("%s: options schema: %v", d.Name, err)
		}
	}
}
