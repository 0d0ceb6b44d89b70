//go:build linux

package geminicli

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/peertest"
	"github.com/mst-eval/mst/provider/providertest"
)

// TestCLIGetsOnlyItsKey runs the real CLI with a run secret it has no use
// for, and reads the CLI's /proc environ while it waits on the model (the
// first request, passed through a proxy to the fake provider): the key is
// in the environment and the other secret is not.
func TestCLIGetsOnlyItsKey(t *testing.T) {
	t.Parallel()
	const prompt, other = "canary-prompt-7f3a please answer", "canary-other-secret-51c9"
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "done"}}}}})
	snoop := providertest.NewProcSnoop(t, fake.URL, nil)
	raw, _ := json.Marshal(map[string]any{"requestMaxAttempts": 1, "baseURL": snoop.URL, "command": peertest.Gemini(t)})
	cs, err := Open(t.Context(), client.OpenParams{
		Variant: "v", Model: "google/gemini-test-1", Options: raw,
		Env:    map[string]string{"GEMINI_API_KEY": testKey, "OTHER_SECRET": other},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	s := cs.(*session)
	t.Cleanup(func() { s.Close() })
	s.onStart = func(pid int) { snoop.PID <- pid }
	res := run(t, t.Context(), s, prompt)
	if res.Answer != "done" {
		t.Errorf("answer %q, want done", res.Answer)
	}
	cmdline, environ := snoop.Cmdline(), snoop.Environ()
	if len(cmdline) == 0 || len(environ) == 0 {
		t.Fatalf("the CLI's /proc files were not read (cmdline %d bytes, environ %d bytes)", len(cmdline), len(environ))
	}
	// The prompt stays in argv for this CLI (see session.args).
	if !bytes.Contains(environ, []byte("GEMINI_API_KEY="+testKey)) {
		t.Errorf("the CLI's environment lacks its key")
	}
	if bytes.Contains(environ, []byte(other)) {
		t.Errorf("the CLI's environment carries a run secret it does not need")
	}
	reqs := fake.Requests()
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "canary-prompt-7f3a") {
		t.Errorf("the prompt did not reach the model")
	}
}
