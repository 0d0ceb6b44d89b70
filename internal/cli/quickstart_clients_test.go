package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestQuickstartOnCLIClients runs the quickstart (examples/quickstart: the
// weather server with its terse tool descriptions against rewritten clear
// ones) through mst run with both variants switched to each CLI client. The
// real CLIs talk to the fake provider in offline mode, where MST's offline
// model decides every turn from the tools the CLI offers, so the clear
// descriptions must win on every client as they do on api with
// `model: offline`. One trial per case keeps it short: the offline model
// gives the same answer every time.
func TestQuickstartOnCLIClients(t *testing.T) {
	t.Parallel()
	claude, codex, gemini := peertest.ClaudeCode(t), peertest.Codex(t), peertest.Gemini(t)
	bin, err := testbin.Build(testbin.Options{}, testbin.Weather)
	if err != nil {
		t.Fatal(err)
	}
	weather := testbin.Path(bin, testbin.Weather)
	fake := providertest.New(t, providertest.Script{Offline: true})
	config, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "eval.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}

	// The api client on the offline model is the reference.
	api := runQuickstart(t, "api", string(config), cases, weather, "    client: api\n    model: offline\n")
	if api["clear"].passed <= api["terse"].passed {
		t.Fatalf("api: clear passes %d cases, terse %d: the quickstart shows no difference on its own client", api["clear"].passed, api["terse"].passed)
	}
	for _, c := range []struct{ client, model, options string }{
		{"claude-code", "anthropic/claude-test", fmt.Sprintf("{baseURL: %q, command: %q, timeout: 180s}", fake.URL, claude)},
		{"codex-cli", "openai/gpt-test", fmt.Sprintf("{baseURL: %q, command: %q, timeout: 180s, requestMaxRetries: 0, streamMaxRetries: 0}", fake.URL+"/v1", codex)},
		{"gemini-cli", "google/gemini-test", fmt.Sprintf("{baseURL: %q, command: %q, timeout: 180s}", fake.URL, gemini)},
	} {
		t.Run(c.client, func(t *testing.T) {
			variant := fmt.Sprintf("    client: %s\n    model: %s\n    clientOptions: %s\n", c.client, c.model, c.options)
			got := runQuickstart(t, c.client, string(config), cases, weather, variant)
			if got["clear"].passed <= got["terse"].passed {
				t.Errorf("%s: clear passes %d cases, terse %d; want clear ahead, as on api (clear %d, terse %d)",
					c.client, got["clear"].passed, got["terse"].passed, api["clear"].passed, api["terse"].passed)
			}
			// The same model deciding from the same weather tools: the CLI
			// must pass and fail the same cases as api, with the same calls
			// to the weather server. Calls to a CLI's own tools (Codex offers
			// its MCP resource tools beside the servers' tools) are logged
			// above, not compared.
			for _, v := range []string{"terse", "clear"} {
				if g, w := got[v].summary(), api[v].summary(); g != w {
					t.Errorf("%s, variant %s: cases differ from api\n got: %s\nwant: %s", c.client, v, g, w)
				}
			}
		})
	}
}

// quickstartResult is what one variant of a quickstart run did.
type quickstartResult struct {
	passed int // cases passed, from the report
	// cases maps a case to whether it passed (from the report) and its
	// outcome and calls to the weather server (from its transcript).
	cases map[string]string
	// others maps a case to its calls to other servers.
	others map[string]string
}

func (r quickstartResult) summary() string {
	var ids []string
	for id := range r.cases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "\n  %s: %s", id, r.cases[id])
	}
	return fmt.Sprintf("%d passed%s", r.passed, b.String())
}

// runQuickstart runs the quickstart with each variant's client and model
// lines replaced by variant, one trial per case, and returns per variant
// what it did.
func runQuickstart(t *testing.T, name, config string, cases []byte, weather, variant string) map[string]quickstartResult {
	t.Helper()
	for _, r := range []struct {
		old, new string
		n        int
	}{
		{"command: ../../bin/weather\n", fmt.Sprintf("command: %q\n", weather), 1},
		{"    client: api\n    model: offline\n", variant, 2},
		{"\ntrials: 3\n", "\ntrials: 1\n", 1},
	} {
		if got := strings.Count(config, r.old); got != r.n {
			t.Fatalf("examples/quickstart/eval.yaml holds %q %d times, want %d: update this test to the quickstart", r.old, got, r.n)
		}
		config = strings.ReplaceAll(config, r.old, r.new)
	}
	dir := t.TempDir()
	// Dummy keys: the fake provider checks none, and the CLIs refuse to
	// start without one.
	secrets := "ANTHROPIC_API_KEY=sk-dummy-quickstart\nOPENAI_API_KEY=sk-dummy-quickstart\nGEMINI_API_KEY=sk-dummy-quickstart\n"
	for file, data := range map[string][]byte{"eval.yaml": []byte(config), "cases.jsonl": cases, "secrets.env": []byte(secrets)} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"run", filepath.Join(dir, "eval.yaml"), "--results", filepath.Join(dir, "results"),
		"--secrets-file", filepath.Join(dir, "secrets.env"), "--json"},
		cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if code != 0 {
		t.Errorf("%s: mst run exited %d\n%s", name, code, stderr.String())
	}
	var rep struct {
		Variants []struct {
			Variant string `json:"variant"`
			Client  string `json:"client"`
			Passed  int    `json:"passed"`
			Graded  int    `json:"graded"`
		} `json:"variants"`
		Cases []struct {
			Case     string `json:"case"`
			Variants []struct {
				Variant string `json:"variant"`
				Passed  int    `json:"passed"`
			} `json:"variants"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Errorf("%s: report: %v\n%s", name, err, stdout.String())
	}
	out := map[string]quickstartResult{}
	result := func(variant string) quickstartResult {
		r, ok := out[variant]
		if !ok {
			r = quickstartResult{cases: map[string]string{}, others: map[string]string{}}
			out[variant] = r
		}
		return r
	}
	for _, v := range rep.Variants {
		if v.Client != name {
			t.Errorf("%s: variant %s ran on client %q", name, v.Variant, v.Client)
		}
		if v.Graded != 14 {
			t.Errorf("%s: variant %s graded %d trials, want 14 (one per case)", name, v.Variant, v.Graded)
		}
		r := result(v.Variant)
		r.passed = v.Passed
		out[v.Variant] = r
	}
	passed := map[transcript.Key]bool{}
	for _, c := range rep.Cases {
		for _, v := range c.Variants {
			passed[transcript.Key{Case: c.Case, Variant: v.Variant}] = v.Passed > 0
		}
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "results", "*", "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("%s: run folders %v, want one", name, runs)
	}
	st, err := store.OpenRunDir(runs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		var weatherCalls, otherCalls []string
		for _, c := range tr.ToolCalls {
			// Arguments in a canonical form: the CLIs reorder keys.
			var args any
			json.Unmarshal(c.Arguments, &args)
			canon, _ := json.Marshal(args)
			call := fmt.Sprintf("%s/%s%s", c.Server, c.Tool, canon)
			if c.Server == "weather" {
				weatherCalls = append(weatherCalls, call)
			} else {
				otherCalls = append(otherCalls, call)
			}
		}
		r := result(tr.Variant)
		verdict := "failed"
		if passed[transcript.Key{Case: tr.Case, Variant: tr.Variant}] {
			verdict = "passed"
		}
		status := tr.Outcome.Status
		if tr.Outcome.Detail != "" {
			status += " (" + tr.Outcome.Detail + ")"
		}
		r.cases[tr.Case] = fmt.Sprintf("%s, %s [%s]", verdict, status, strings.Join(weatherCalls, " "))
		if len(otherCalls) > 0 {
			r.others[tr.Case] = strings.Join(otherCalls, " ")
		}
		return nil
	})
	for _, v := range []string{"terse", "clear"} {
		t.Logf("%s, variant %s: %s", name, v, out[v].summary())
		for c, calls := range out[v].others {
			t.Logf("%s, variant %s, case %s: calls to the CLI's own tools: %s", name, v, c, calls)
		}
	}
	return out
}
