package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestCLIClientsEval runs one eval with four variants, api, claude-code,
// codex-cli and gemini-cli, against the real npm server-everything, through mst run:
// the real CLIs talk to the fake provider (both wire formats from one
// server), the key reaches them only through the secrets file, and every
// variant yields a complete, comparable transcript.
func TestCLIClientsEval(t *testing.T) {
	t.Parallel()
	everything := peertest.Everything(t)
	claude, codex, gemini := peertest.ClaudeCode(t), peertest.Codex(t), peertest.Gemini(t)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "hello from the eval"}}}, InputTokens: 40, OutputTokens: 8},
			{Text: "The server said: hello from the eval", InputTokens: 60, OutputTokens: 9},
		},
	}}})
	dir := t.TempDir()
	const key = "sk-test-canary-4f1e9a7c2b"
	os.WriteFile(filepath.Join(dir, "secrets.env"), []byte("ANTHROPIC_API_KEY="+key+"\nOPENAI_API_KEY="+key+"\nGEMINI_API_KEY="+key+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(`{"id": "echo", "input": "Please echo 'hello from the eval'", "expect": [{"toolCalled": {"tool": "echo", "server": "everything"}}, {"answerContains": "hello from the eval"}]}`+"\n"), 0o644)
	args, _ := json.Marshal(everything.Args)
	eval := fmt.Sprintf(`name: cliclients
datasets: [cases.jsonl]
servers:
  everything: {command: %q, args: %s}
variants:
  api:
    model: anthropic/claude-test
    clientOptions: {baseURL: %q}
  claude-code:
    client: claude-code
    model: anthropic/claude-test
    clientOptions: {baseURL: %q, command: %q, timeout: 120s}
  codex-cli:
    client: codex-cli
    model: openai/gpt-test
    clientOptions: {baseURL: %q, command: %q, timeout: 120s, requestMaxRetries: 0, streamMaxRetries: 0}
  gemini-cli:
    client: gemini-cli
    model: google/gemini-test
    clientOptions: {baseURL: %q, command: %q, timeout: 120s}
`, everything.Command, args, fake.URL, fake.URL, claude, fake.URL+"/v1", codex, fake.URL, gemini)
	os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(eval), 0o644)

	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"run", filepath.Join(dir, "eval.yaml"), "--results", filepath.Join(dir, "results"),
		"--secrets-file", filepath.Join(dir, "secrets.env"), "--json"},
		cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if code != 0 {
		t.Fatalf("mst run exited %d\n%s", code, stderr.String())
	}
	var rep struct {
		Variants []struct {
			Variant  string   `json:"variant"`
			PassRate *float64 `json:"passRate"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout.String())
	}
	for _, v := range rep.Variants {
		if v.PassRate == nil || *v.PassRate != 1 {
			t.Errorf("variant %s: pass rate %v, want 1", v.Variant, v.PassRate)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "results", "*", "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("run folders: %v", runs)
	}
	st, _ := store.OpenRunDir(runs[0], nil)
	seen := map[string]bool{}
	st.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		seen[tr.Variant] = true
		if tr.Outcome.Status != transcript.Answered || len(tr.ToolCalls) != 1 || tr.ToolCalls[0].Server != "everything" || tr.ToolCalls[0].Tool != "echo" ||
			!strings.Contains(tr.ToolCalls[0].Result, "hello from the eval") || tr.Usage.OutputTokens == 0 || tr.Client.Name != tr.Variant {
			t.Errorf("%s: outcome %+v, client %s, calls %+v, usage %+v", tr.Variant, tr.Outcome, tr.Client.Name, tr.ToolCalls, tr.Usage)
		}
		if tr.Variant != "api" && tr.Client.Version == "" {
			t.Errorf("%s: no CLI version recorded", tr.Variant)
		}
		return nil
	})
	if len(seen) != 4 {
		t.Errorf("transcripts for %v, want api, claude-code, codex-cli and gemini-cli", seen)
	}
	// The key never reaches a file MST stored.
	filepath.Walk(runs[0], func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(key)) {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})
}
