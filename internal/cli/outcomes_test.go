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

// outcomeClients are the clients TestOutcomeTable runs, with the model and
// base URL each takes from a fake provider at url, and the client options
// it needs besides (the CLI's path).
type outcomeClient struct {
	name, model string
	baseURL     func(url string) string
	options     func(t *testing.T) string
}

func outcomeClients() []outcomeClient {
	root := func(u string) string { return u }
	v1 := func(u string) string { return u + "/v1" }
	none := func(*testing.T) string { return "" }
	cmd := func(path func(testing.TB) string) func(t *testing.T) string {
		return func(t *testing.T) string { return fmt.Sprintf(", command: %q", path(t)) }
	}
	return []outcomeClient{
		{"api", "anthropic/claude-test", root, none},
		{"claude-code", "anthropic/claude-test", root, cmd(peertest.ClaudeCode)},
		{"codex-cli", "openai/gpt-test", v1, cmd(peertest.Codex)},
		{"gemini-cli", "google/gemini-test", root, cmd(peertest.Gemini)},
	}
}

// TestOutcomeTable runs every client of docs/outcomes.md through mst run
// against each way a provider or a server fails, and checks that each
// trial ends as the document's tables say: a provider that never answers
// makes the trial errored (provider), waiting on the model, under every
// client, and a run of nothing else neither exits 0 nor calls itself
// complete; a stream cut mid-body is retried and the trial answered; each
// injected fault kind leaves the trial to the client, which carries on, and
// the trial is graded.
func TestOutcomeTable(t *testing.T) {
	t.Parallel()
	everything := peertest.Everything(t)
	args, _ := json.Marshal(everything.Args)
	clients := outcomeClients()
	// A scenario's model calls echo; in the hidden scenario, the variant
	// does not offer echo, and the model asks for it under the name each
	// client would have given it.
	hiddenName := map[string]string{"api": "echo", "claude-code": "mcp__everything__echo", "codex-cli": "echo", "gemini-cli": "mcp_everything_echo"}
	script := func(tool string, faults ...providertest.Fault) providertest.Script {
		return providertest.Script{Faults: faults, Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: tool, Arguments: map[string]any{"message": "outcome table"}}}},
			{Text: "The echo tool was called: done."},
		}}}}
	}
	// eval writes an eval with one variant per client and scenario; each
	// variant has its own fake provider, so one variant's faults never
	// reach another's requests.
	eval := func(t *testing.T, dir, timeout string, scenarios map[string]string, faults map[string][]providertest.Fault) string {
		var b strings.Builder
		fmt.Fprintf(&b, "name: outcomes\ndatasets: [cases.jsonl]\nservers:\n  everything: {command: %q, args: %s}\nvariants:\n", everything.Command, args)
		for scenario, extra := range scenarios {
			for _, c := range clients {
				tool := "echo"
				if scenario == "hidden" {
					tool = hiddenName[c.name]
				}
				fake := providertest.New(t, script(tool, faults[scenario]...))
				fmt.Fprintf(&b, "  %s-%s:\n    client: %s\n    model: %s\n    clientOptions: {baseURL: %q, timeout: %s%s}\n%s",
					scenario, c.name, c.name, c.model, c.baseURL(fake.URL), timeout, c.options(t), extra)
			}
		}
		os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(`{"id": "echo", "input": "Please call echo with 'outcome table'", "expect": [{"answerContains": "done"}]}`+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "secrets.env"), []byte("ANTHROPIC_API_KEY=sk-fake\nOPENAI_API_KEY=sk-fake\nGEMINI_API_KEY=sk-fake\n"), 0o600)
		path := filepath.Join(dir, "eval.yaml")
		os.WriteFile(path, []byte(b.String()), 0o644)
		return path
	}
	run := func(t *testing.T, dir, evalPath string) (int, string, string, map[string]*transcript.Transcript) {
		var stdout, stderr bytes.Buffer
		code := cli.Main(t.Context(), []string{"run", evalPath, "--results", filepath.Join(dir, "results"), "--secrets-file", filepath.Join(dir, "secrets.env")},
			cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr, Env: []string{"PATH=" + os.Getenv("PATH")}})
		runs, _ := filepath.Glob(filepath.Join(dir, "results", "*", "runs", "*"))
		if len(runs) != 1 {
			t.Fatalf("mst run exited %d with run folders %v\n%s\n%s", code, runs, stdout.String(), stderr.String())
		}
		st, err := store.OpenRunDir(runs[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		trs := map[string]*transcript.Transcript{}
		st.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
			trs[tr.Variant] = tr
			return nil
		})
		return code, stdout.String(), stderr.String(), trs
	}

	t.Run("silent provider", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// Every request is held until the client goes away. The timeout
		// leaves a CLI on a loaded machine time to start and ask.
		hang := []providertest.Fault{{Hang: true, Times: 1000}}
		code, stdout, stderr, trs := run(t, dir, eval(t, dir, "90s", map[string]string{"silent": ""}, map[string][]providertest.Fault{"silent": hang}))
		if code == 0 {
			t.Errorf("mst run exited 0 when every trial met a silent provider\n%s", stdout)
		}
		for _, c := range clients {
			tr := trs["silent-"+c.name]
			if tr == nil {
				t.Errorf("%s: no transcript", c.name)
				continue
			}
			o := tr.Outcome
			if o.Status != transcript.Errored || o.Cause != transcript.CauseProvider || o.WaitingOn != transcript.WaitingModel {
				t.Errorf("%s: outcome %+v, want errored (provider), waiting on the model", c.name, o)
			}
		}
		header, _, _ := strings.Cut(stdout+stderr, "VARIANT")
		if strings.Contains(header, "complete") {
			t.Errorf("the report of a run in which every trial errored says complete:\n%s", header)
		}
		if !strings.Contains(header, transcript.CollectErrored) {
			t.Errorf("the report's header does not say the run errored:\n%s", header)
		}
	})

	t.Run("cut stream and faults", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		scenarios := map[string]string{
			"cut":        "",
			"latency":    "    faults: {everything: [{kind: latency, delay: 10ms}]}\n",
			"error":      "    faults: {everything: [{kind: error, tools: [echo], message: quota exceeded}]}\n",
			"protocol":   "    faults: {everything: [{kind: protocol, tools: [echo], message: backend unavailable}]}\n",
			"disconnect": "    faults: {everything: [{kind: disconnect}]}\n",
			"hidden":     "    tools: {everything: {echo: {hidden: true}}}\n",
		}
		// The first model request's answer is cut off half way.
		faults := map[string][]providertest.Fault{"cut": {{Cut: true, Times: 1}}}
		code, stdout, stderr, trs := run(t, dir, eval(t, dir, "180s", scenarios, faults))
		// The Gemini CLI does not retry an answer cut off mid-body (its
		// fetch ends "terminated", which it does not count as a network
		// error): that trial is errored (provider), and the run exits 4
		// because of it alone.
		if code != int(cli.ExitUnanswered) || !strings.Contains(stderr, "provider") {
			t.Errorf("mst run exited %d, want %d for the one errored (provider) trial\n%s\n%s", code, cli.ExitUnanswered, stdout, stderr)
		}
		if strings.Contains(stdout+stderr, "%!") {
			t.Errorf("the output holds a Go formatting error:\n%s", stdout)
		}
		for scenario := range scenarios {
			for _, c := range clients {
				v := scenario + "-" + c.name
				tr := trs[v]
				if tr == nil {
					t.Errorf("%s: no transcript", v)
					continue
				}
				if scenario == "cut" && c.name == "gemini-cli" {
					if o := tr.Outcome; o.Status != transcript.Errored || o.Cause != transcript.CauseProvider || !strings.Contains(o.Detail, "terminated") {
						t.Errorf("%s: outcome %+v, want errored (provider): the CLI does not retry a cut answer", v, o)
					}
					continue
				}
				if tr.Outcome.Status != transcript.Answered || !strings.Contains(tr.Answer, "done") {
					t.Errorf("%s: outcome %+v, answer %q; want answered: %s", v, tr.Outcome, tr.Answer, map[bool]string{true: "a cut stream is retried", false: "an injected fault leaves the trial to the client"}[scenario == "cut"])
				}
				if scenario == "cut" {
					continue
				}
				if scenario == "hidden" {
					// No server got the call: it is never among the calls
					// graders count, whichever client refused it.
					for _, call := range tr.ToolCalls {
						if call.Tool == "echo" || strings.HasSuffix(call.Tool, "echo") {
							t.Errorf("%s: the call of the hidden tool is counted as made: %+v", v, call)
						}
					}
					continue
				}
				var echo *transcript.ToolCall
				for i, call := range tr.ToolCalls {
					if call.Tool == "echo" {
						echo = &tr.ToolCalls[i]
					}
				}
				if echo == nil || !strings.HasPrefix(echo.Injected, scenario) || echo.Evidence != transcript.EvidenceServer {
					t.Errorf("%s: the echo call is recorded as %+v, want it marked injected %s", v, echo, scenario)
				}
			}
		}
	})
}
