package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestProxyOnCLIClients: a variant that renames a write tool and runs dry,
// on each real CLI. The CLI sees only the new name; the call comes back in
// the transcript under the server's name, marked simulated, with the CLI's
// own account agreeing; the write never reaches the server.
func TestProxyOnCLIClients(t *testing.T) {
	t.Parallel()
	claude, codex, gemini := peertest.ClaudeCode(t), peertest.Codex(t), peertest.Gemini(t)
	bin, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	server := testbin.Path(bin, testbin.TestServer)
	fake := providertest.New(t, providertest.Script{Offline: true})
	for _, c := range []struct{ client, model, options string }{
		{"claude-code", "anthropic/claude-test", fmt.Sprintf("{baseURL: %q, command: %q}", fake.URL, claude)},
		{"codex-cli", "openai/gpt-test", fmt.Sprintf("{baseURL: %q, command: %q, requestMaxRetries: 0, streamMaxRetries: 0}", fake.URL+"/v1", codex)},
		{"gemini-cli", "google/gemini-test", fmt.Sprintf("{baseURL: %q, command: %q}", fake.URL, gemini)},
	} {
		t.Run(c.client, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			notes := filepath.Join(dir, "notes")
			if err := os.Mkdir(notes, 0o700); err != nil {
				t.Fatal(err)
			}
			config := fmt.Sprintf(`name: proxied
datasets: [cases.jsonl]
servers:
  notes:
    command: %q
    args: [--notes, %q]
    writes: [%s]
variants:
  dry:
    client: %s
    model: %s
    clientOptions: %s
    dryRun: declared
    tools:
      notes:
        %s: {name: save_memo, description: "Save a memo under a name."}
`, server, notes, testserver.WriteNote, c.client, c.model, c.options, testserver.WriteNote)
			files := map[string]string{
				"eval.yaml":   config,
				"cases.jsonl": `{"id": "memo", "input": "Save a memo named 'groceries'"}` + "\n",
				"secrets.env": "ANTHROPIC_API_KEY=sk-dummy\nOPENAI_API_KEY=sk-dummy\nGEMINI_API_KEY=sk-dummy\n",
			}
			runEvalFiles(t, dir, files)
			runs, _ := filepath.Glob(filepath.Join(dir, "results", "*", "runs", "*"))
			if len(runs) != 1 {
				t.Fatalf("run folders %v, want one", runs)
			}
			st, err := store.OpenRunDir(runs[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := st.ReadTranscript(t.Context(), transcript.Key{Case: "memo", Variant: "dry", Trial: 1})
			if err != nil {
				t.Fatal(err)
			}
			var mcp []transcript.ToolCall
			for _, tc := range tr.ToolCalls {
				if tc.Server == "notes" {
					mcp = append(mcp, tc)
				}
			}
			if len(mcp) != 1 {
				t.Fatalf("calls of the notes server %+v (outcome %+v); want the one write", tr.ToolCalls, tr.Outcome)
			}
			got := mcp[0]
			if got.Tool != testserver.WriteNote || got.OfferedAs != "save_memo" || !got.Simulated || got.Evidence != transcript.EvidenceServer {
				t.Errorf("the call is recorded as %+v; want %s offered as save_memo, simulated, from the proxy", got, testserver.WriteNote)
			}
			if len(tr.Discrepancies) > 0 {
				t.Errorf("the CLI's account disagrees with the proxy's: %+v (the CLI reported %+v)", tr.Discrepancies, tr.ClientToolCalls)
			}
			if len(tr.Servers) == 0 || tr.Servers[0].Offered[testserver.WriteNote] != "save_memo" || tr.Servers[0].ServerToolsHash == "" {
				t.Errorf("servers %+v; want the proxy's record with the renamed tool", tr.Servers)
			}
			if ents, _ := os.ReadDir(notes); len(ents) > 0 {
				t.Errorf("the dry run's write reached the server: it left %s", ents[0].Name())
			}
		})
	}
}
