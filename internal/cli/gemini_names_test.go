package cli_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mst-eval/mst/internal/ground/toolname"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestGeminiToolNamesMatchServer runs the real Gemini CLI, through mst run
// and MST's proxy, on a server whose tools include one named with accents
// (météo_prévision) and one whose name the CLI cuts short (past 63
// characters with its prefix). The CLI offers the model each under a name
// of its own, and reports the model's calls under those names; the
// transcript records both calls under the server's names, the CLI's
// account agreeing with the proxy's, so no discrepancy is found.
func TestGeminiToolNamesMatchServer(t *testing.T) {
	t.Parallel()
	gemini := peertest.Gemini(t)
	bin, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	server := testbin.Path(bin, testbin.TestServer)
	accented, long := toolname.Gemini("many", testserver.UnicodeTool), toolname.Gemini("many", testserver.LongTool)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: accented, Arguments: map[string]any{"text": "Paris"}}}},
		{ToolCalls: []providertest.Call{{Tool: long, Arguments: map[string]any{"text": "north"}}}},
		{Text: "It is sunny in Paris, and the north holds 12 crates."},
	}}}})
	dir := t.TempDir()
	config := fmt.Sprintf(`name: accents
datasets: [cases.jsonl]
servers:
  many:
    command: %q
    args: [--many]
variants:
  gem:
    client: gemini-cli
    model: google/gemini-test
    clientOptions: {baseURL: %q, command: %q, requestMaxAttempts: 1}
`, server, fake.URL, gemini)
	files := map[string]string{
		"eval.yaml":   config,
		"cases.jsonl": `{"id": "weather", "input": "What is the weather in Paris, and the north's inventory?"}` + "\n",
		"secrets.env": "GEMINI_API_KEY=sk-dummy\n",
	}
	runEvalFiles(t, dir, files)
	reqs := fake.Requests()
	if len(reqs) == 0 || !slices.Contains(reqs[0].Tools, accented) || !slices.Contains(reqs[0].Tools, long) {
		t.Fatalf("the CLI offered %v, want %s and %s among them (toolname.Gemini is the CLI's rule)", reqs[0].Tools, accented, long)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "results", "*", "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("run folders %v, want one", runs)
	}
	st, err := store.OpenRunDir(runs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := st.ReadTranscript(t.Context(), transcript.Key{Case: "weather", Variant: "gem", Trial: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{testserver.UnicodeTool, testserver.LongTool}
	var got, reported []string
	for _, c := range tr.ToolCalls {
		if c.Server == "many" && c.Evidence == transcript.EvidenceServer {
			got = append(got, c.Tool)
		}
	}
	for _, c := range tr.ClientToolCalls {
		reported = append(reported, c.Server+"/"+c.Tool)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the proxy recorded calls of %v (outcome %+v), want %v", got, tr.Outcome, want)
	}
	if !slices.Equal(reported, []string{"many/" + testserver.UnicodeTool, "many/" + testserver.LongTool}) {
		t.Errorf("the CLI's account, as the client read it, is %v; want the server's names", reported)
	}
	if len(tr.Discrepancies) > 0 {
		t.Errorf("the CLI's account disagrees with the proxy's: %+v", tr.Discrepancies)
	}
}
