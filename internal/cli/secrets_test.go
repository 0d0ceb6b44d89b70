package cli_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// canary returns a value no text holds by chance.
func canary(t *testing.T) string {
	t.Helper()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "canary-" + hex.EncodeToString(b[:])
}

// testServerCommand puts the test binary in dir under the name
// mcp-testserver: TestMain (through testscript.Main) runs the test server
// when the binary is started under that name.
func testServerCommand(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "mcp-testserver")
	if os.Link(exe, dst) == nil {
		return dst
	}
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestSecretsNeverStored plants canary secrets where a run meets them: one
// in the prompt that the test MCP server echoes back (so it is in the case,
// the tool call, the tool result and the answer), one in what the model
// says (the fake provider's scripted answer and tool call), and one as the
// Anthropic key, given only through the secrets file. It then reads every
// byte of the run folder and of the CLI's output and finds none of them,
// while the transcripts show the run answered with the values redacted.
func TestSecretsNeverStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	echoCanary, modelCanary, keyCanary := canary(t), canary(t), canary(t)
	canaries := map[string]string{"ECHO_TOKEN": echoCanary, "MODEL_TOKEN": modelCanary, "ANTHROPIC_API_KEY": keyCanary}

	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{Text: "Let me echo that.", ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"text": modelCanary}}}},
			{Text: "The server said " + modelCanary},
		},
	}}})
	files := map[string]string{
		"secrets.env": fmt.Sprintf("# canaries\nECHO_TOKEN=%s\nexport MODEL_TOKEN='%s'\nANTHROPIC_API_KEY=%q\n", echoCanary, modelCanary, keyCanary),
		"eval.yaml": fmt.Sprintf(`name: canary
datasets: [cases.jsonl]
servers:
  test: {command: %q}
variants:
  offline:
    model: offline
    description: "the offline model, which must never learn %s"
  claude:
    model: anthropic/claude-test
    clientOptions: {baseURL: %q}
trials: 1
graders:
  - toolCalled: echo
`, testServerCommand(t, dir), modelCanary, fake.URL),
		"cases.jsonl": fmt.Sprintf(`{"id": "echo-canary", "input": "Please echo '%s'", "expect": [{"answerContains": %q}]}`+"\n", echoCanary, echoCanary),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	results := filepath.Join(dir, "results")

	var stdout, stderr bytes.Buffer
	args := []string{"run", filepath.Join(dir, "eval.yaml"), "--results", results, "--secrets-file", filepath.Join(dir, "secrets.env"), "--verbose"}
	code := cli.Main(t.Context(), args, cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr, Env: []string{"NO_COLOR=1"}})
	if code != 0 {
		t.Fatalf("mst run exited %d\nstderr:\n%s", code, stderr.String())
	}

	// The key reached the provider only through the secrets file.
	// (The SDK sends it as x-api-key or as a bearer token.)
	reqs := fake.Requests()
	carried := func(h map[string][]string) bool {
		for _, name := range []string{"X-Api-Key", "Authorization"} {
			for _, v := range h[name] {
				if strings.Contains(v, keyCanary) {
					return true
				}
			}
		}
		return false
	}
	if len(reqs) == 0 || !carried(reqs[0].Header) {
		t.Errorf("the fake provider got %d requests, want the first to carry the key planted in the secrets file", len(reqs))
	}

	// No canary in any byte of any file under the results folder.
	stored := 0
	err := filepath.WalkDir(results, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		stored++
		for name, c := range canaries {
			if bytes.Contains(b, []byte(c)) {
				t.Errorf("%s holds the value of %s", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stored < 6 { // run.json, eval.yaml, cases.jsonl, graders.json, grades.json, transcripts
		t.Errorf("the run folder holds %d files, want at least 6", stored)
	}
	for stream, b := range map[string][]byte{"stdout": stdout.Bytes(), "stderr": stderr.Bytes()} {
		for name, c := range canaries {
			if bytes.Contains(b, []byte(c)) {
				t.Errorf("%s shows the value of %s", stream, name)
			}
		}
	}

	// The run did its work, and the redaction markers show the path taken.
	runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "canary-*"))
	if len(runs) != 1 {
		t.Fatalf("run folders = %v, want one", runs)
	}
	st, err := store.OpenRunDir(runs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]*transcript.Transcript{}
	if err := st.Transcripts(t.Context(), func(tr *transcript.Transcript) error { seen[tr.Variant] = tr; return nil }); err != nil {
		t.Fatal(err)
	}
	for variant, marker := range map[string]string{"offline": "[redacted:ECHO_TOKEN]", "claude": "[redacted:MODEL_TOKEN]"} {
		tr := seen[variant]
		if tr == nil {
			t.Errorf("no transcript for variant %s", variant)
			continue
		}
		if tr.Outcome.Status != transcript.Answered {
			t.Errorf("variant %s: outcome = %+v, want answered", variant, tr.Outcome)
		}
		if len(tr.ToolCalls) != 1 || !strings.Contains(tr.ToolCalls[0].Result, marker) || !strings.Contains(string(tr.ToolCalls[0].Arguments), marker) {
			t.Errorf("variant %s: tool calls = %+v, want one echo with %s in its arguments and result", variant, tr.ToolCalls, marker)
		}
		if !strings.Contains(tr.Answer, marker) {
			t.Errorf("variant %s: answer = %q, want %s in it", variant, tr.Answer, marker)
		}
	}
	if tr := seen["offline"]; tr != nil && !strings.Contains(tr.Prompt, "[redacted:ECHO_TOKEN]") {
		t.Errorf("offline transcript prompt = %q, want the planted value redacted", tr.Prompt)
	}

	// An error message that would quote a secret shows it redacted.
	stderr.Reset()
	args = append(args, "--variant", echoCanary)
	if code := cli.Main(t.Context(), args, cli.Stdio{In: strings.NewReader(""), Out: io.Discard, Err: &stderr}); code != int(cli.ExitUsage) {
		t.Errorf("mst run --variant <secret> exited %d, want %d", code, int(cli.ExitUsage))
	}
	if got := stderr.String(); strings.Contains(got, echoCanary) || !strings.Contains(got, "--variant [redacted:ECHO_TOKEN]: no such variant") {
		t.Errorf("mst run --variant <secret> printed %q, want the error with the value redacted", got)
	}
}
