// Package quickstart_test checks that the quickstart shows what its README
// promises: on the offline model, the clear tool descriptions pass clearly
// more cases than the terse ones the server ships with.
//
// MST's runner is not used here. The test plays the api client itself, in
// the smallest form that matches what it does: it lists the server's tools,
// applies the variant's description overrides, asks the model, calls the
// tools it asks for over MCP and asks again until the model answers. It then
// grades each trial with a local reading of the grader grammar.
package quickstart_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mst-eval/mst/examples/quickstart/internal/weather"
	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/provider"
)

// evalFile is the part of the eval config grammar the quickstart uses. It is
// decoded strictly, so a key the grammar does not have fails the test.
type evalFile struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Datasets    []string `yaml:"datasets"`
	Servers     map[string]struct {
		Command string `yaml:"command"`
	} `yaml:"servers"`
	Variants map[string]struct {
		Description string `yaml:"description"`
		Client      string `yaml:"client"`
		Model       string `yaml:"model"`
		// Tools maps server name → tool name → override.
		Tools map[string]map[string]struct {
			Description string `yaml:"description"`
		} `yaml:"tools"`
	} `yaml:"variants"`
	Trials  int   `yaml:"trials"`
	Graders []any `yaml:"graders"`
	Limits  struct {
		Concurrency int `yaml:"concurrency"`
	} `yaml:"limits"`
}

type evalCase struct {
	ID     string            `json:"id"`
	Input  string            `json:"input"`
	Expect []json.RawMessage `json:"expect"`
}

func loadEval(t *testing.T) (evalFile, []evalCase) {
	t.Helper()
	data, err := os.ReadFile("eval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ev evalFile
	if err := yaml.UnmarshalWithOptions(data, &ev, yaml.Strict()); err != nil {
		t.Fatalf("eval.yaml: %v", err)
	}
	var cases []evalCase
	for _, name := range ev.Datasets {
		f, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(f))
		for line := 1; sc.Scan(); line++ {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			dec := json.NewDecoder(strings.NewReader(sc.Text()))
			dec.DisallowUnknownFields()
			var c evalCase
			if err := dec.Decode(&c); err != nil {
				t.Fatalf("%s:%d: %v", name, line, err)
			}
			cases = append(cases, c)
		}
	}
	return ev, cases
}

// trial is what one trial produced, as the graders see it.
type trial struct {
	calls  []provider.ToolCall
	answer string
}

// connect starts a weather server in memory and returns a client session.
func connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := weather.NewServer().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatalf("starting the weather server: %v", err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "quickstart-test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatalf("connecting to the weather server: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// offeredTools lists the server's tools with the variant's descriptions.
func offeredTools(ctx context.Context, cs *mcp.ClientSession, overrides map[string]string) ([]provider.Tool, error) {
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	var tools []provider.Tool
	for _, tl := range res.Tools {
		schema, err := json.Marshal(tl.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", tl.Name, err)
		}
		desc := tl.Description
		if d, ok := overrides[tl.Name]; ok {
			desc = d
		}
		tools = append(tools, provider.Tool{Name: tl.Name, Description: desc, InputSchema: schema})
	}
	for name := range overrides {
		if !slices.ContainsFunc(tools, func(t provider.Tool) bool { return t.Name == name }) {
			return nil, fmt.Errorf("override of %s: the server has no such tool", name)
		}
	}
	return tools, nil
}

// runTrial plays one trial the way the api client does.
func runTrial(ctx context.Context, p provider.Provider, cs *mcp.ClientSession, tools []provider.Tool, prompt string) (trial, error) {
	var tr trial
	msgs := []provider.Message{{Role: provider.User, Text: prompt}}
	for range 10 {
		resp, err := p.Complete(ctx, provider.Request{Model: "offline", Messages: msgs, Tools: tools})
		if err != nil {
			return tr, err
		}
		msgs = append(msgs, provider.Message{Role: provider.Assistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			tr.answer = resp.Text
			return tr, nil
		}
		var results []provider.ToolResult
		for _, call := range resp.ToolCalls {
			tr.calls = append(tr.calls, call)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call.Name, Arguments: call.Arguments})
			if err != nil {
				return tr, fmt.Errorf("calling %s: %w", call.Name, err)
			}
			var text []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text = append(text, tc.Text)
				}
			}
			results = append(results, provider.ToolResult{CallID: call.ID, Name: call.Name, Content: strings.Join(text, "\n"), IsError: res.IsError})
		}
		msgs = append(msgs, provider.Message{Role: provider.User, ToolResults: results})
	}
	return tr, fmt.Errorf("no answer after 10 turns")
}

// grade applies one grader of the grader grammar to a trial.
func grade(raw json.RawMessage, tr trial) (bool, error) {
	var g map[string]json.RawMessage
	if err := json.Unmarshal(raw, &g); err != nil || len(g) != 1 {
		return false, fmt.Errorf("grader %s: want an object with one key", raw)
	}
	for kind, arg := range g {
		switch kind {
		case "toolCalled", "toolNotCalled":
			var want struct {
				Tool      string         `json:"tool"`
				Arguments map[string]any `json:"arguments"`
			}
			if json.Unmarshal(arg, &want.Tool) != nil {
				if err := json.Unmarshal(arg, &want); err != nil {
					return false, fmt.Errorf("grader %s: %w", raw, err)
				}
			}
			called := slices.ContainsFunc(tr.calls, func(c provider.ToolCall) bool {
				return c.Name == want.Tool && argumentsInclude(c.Arguments, want.Arguments)
			})
			return called == (kind == "toolCalled"), nil
		case "answerContains":
			var s string
			if err := json.Unmarshal(arg, &s); err != nil {
				return false, fmt.Errorf("grader %s: %w", raw, err)
			}
			return strings.Contains(tr.answer, s), nil
		case "maxToolCalls":
			var n int
			if err := json.Unmarshal(arg, &n); err != nil {
				return false, fmt.Errorf("grader %s: %w", raw, err)
			}
			return len(tr.calls) <= n, nil
		default:
			return false, fmt.Errorf("grader %s: unknown kind %q", raw, kind)
		}
	}
	panic("unreachable")
}

// argumentsInclude reports whether the call's arguments hold every wanted
// key with an equal JSON value.
func argumentsInclude(got json.RawMessage, want map[string]any) bool {
	var args map[string]any
	if err := json.Unmarshal(got, &args); err != nil {
		return false
	}
	for k, v := range want {
		if !cmp.Equal(args[k], v) {
			return false
		}
	}
	return true
}

func TestQuickstartVariants(t *testing.T) {
	t.Parallel()
	ev, cases := loadEval(t)
	if want := filepath.Join("..", "..", "bin", "weather"); filepath.Clean(ev.Servers["weather"].Command) != want {
		t.Errorf("eval.yaml: servers.weather.command = %q, want %q (where the README builds it)", ev.Servers["weather"].Command, want)
	}
	if len(cases) < 10 {
		t.Fatalf("cases.jsonl has %d cases, want at least 10", len(cases))
	}

	// passed[variant][case] is whether every trial of the case passed.
	passed := map[string]map[string]bool{}
	rate := map[string]float64{}
	for _, name := range []string{"terse", "clear"} {
		v, ok := ev.Variants[name]
		if !ok {
			t.Fatalf("eval.yaml has no variant %q", name)
		}
		p, err := offline.New(v.Model)
		if err != nil {
			t.Fatalf("variant %s: %v", name, err)
		}
		overrides := map[string]string{}
		for tool, o := range v.Tools["weather"] {
			overrides[tool] = o.Description
		}
		cs := connect(t)
		tools, err := offeredTools(t.Context(), cs, overrides)
		if err != nil {
			t.Fatalf("variant %s: %v", name, err)
		}
		passed[name] = map[string]bool{}
		good, total := 0, 0
		for _, c := range cases {
			var outcomes []bool
			for range max(ev.Trials, 1) {
				tr, err := runTrial(t.Context(), p, cs, tools, c.Input)
				if err != nil {
					t.Fatalf("variant %s, case %s: %v", name, c.ID, err)
				}
				ok := true
				for _, g := range c.Expect {
					pass, err := grade(g, tr)
					if err != nil {
						t.Fatalf("case %s: %v", c.ID, err)
					}
					ok = ok && pass
				}
				outcomes = append(outcomes, ok)
				total++
				if ok {
					good++
				}
				if len(outcomes) == 1 {
					t.Logf("%-5s %-20s pass=%-5v calls=%s answer=%q", name, c.ID, ok, callsString(tr.calls), firstLine(tr.answer))
				}
			}
			if slices.Contains(outcomes, !outcomes[0]) {
				t.Errorf("variant %s, case %s: trials disagree (%v); the offline model must be deterministic", name, c.ID, outcomes)
			}
			passed[name][c.ID] = outcomes[0]
		}
		rate[name] = float64(good) / float64(total)
		t.Logf("variant %s: %d/%d trials passed (%.0f%%)", name, good, total, 100*rate[name])
	}

	if rate["clear"] < 0.8 || rate["terse"] > 0.5 || rate["clear"]-rate["terse"] < 0.3 {
		t.Errorf("pass rates: terse %.0f%%, clear %.0f%%; want terse at most 50%%, clear at least 80%% and a gap of 30 points or more",
			100*rate["terse"], 100*rate["clear"])
	}

	// The README walks through these outcomes; keep them in step with it.
	want := map[string]map[string]bool{
		"terse": {
			"rain-oslo": false, "weekend-tokyo": true, "snow-reykjavik": false, "tomorrow-oslo": false,
			"unknown-city": false, "now-lisbon": true, "humid-cairo": false, "warmer-cairo-lisbon": false,
			"storm-north-sea": false, "alerts-alps": true, "convert-c-to-f": true, "kelvin-to-c": false,
			"which-places": false, "off-topic": true,
		},
		"clear": {
			"rain-oslo": true, "weekend-tokyo": true, "snow-reykjavik": true, "tomorrow-oslo": true,
			"unknown-city": true, "now-lisbon": true, "humid-cairo": true, "warmer-cairo-lisbon": false,
			"storm-north-sea": true, "alerts-alps": true, "convert-c-to-f": true, "kelvin-to-c": true,
			"which-places": true, "off-topic": true,
		},
	}
	if diff := cmp.Diff(want, passed); diff != "" {
		t.Errorf("case outcomes differ from the README (-want +got):\n%s", diff)
	}
}

func callsString(calls []provider.ToolCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, c.Name+string(c.Arguments))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
