package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
)

// clientCatalog is fakeCatalog that knows its clients' definitions too
// (ClientCatalog), with solo: a client that starts the servers itself,
// runs anthropic and offline models and checks its options beyond their
// schema.
type clientCatalog struct{ fakeCatalog }

var clientDefs = map[string]*client.Definition{
	"api": {Name: "api", ProxiedServers: true, Options: json.RawMessage(fakeClients["api"])},
	"solo": {
		Name:           "solo",
		ModelProviders: []string{"anthropic", "offline"},
		Options: json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {
			"timeout": {"type": "string"}, "apiKeyEnv": {"type": "string"}, "mode": {"type": "string"}}}`),
		Check: func(model string, options json.RawMessage) error {
			var o struct{ Mode string }
			if err := json.Unmarshal(options, &o); len(options) > 0 && err != nil {
				return fmt.Errorf("clientOptions: %w", err)
			}
			if o.Mode == "bad" {
				return errors.New("clientOptions.mode: solo has no mode bad: write fast or slow")
			}
			if model == "offline/broken" {
				return fmt.Errorf("model %s is broken: pick another", model)
			}
			return nil
		},
	},
}

func (c clientCatalog) ClientOptions(name string) (json.RawMessage, error) {
	if d, ok := clientDefs[name]; ok {
		return d.Options, nil
	}
	return c.fakeCatalog.ClientOptions(name)
}

func (clientCatalog) ClientDefinition(name string) (*client.Definition, error) {
	if d, ok := clientDefs[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("unknown client %q", name)
}

// clientsHead declares a stdio server and a connector server.
const clientsHead = `name: t
datasets: [cases.jsonl]
servers:
  weather: {command: node}
  notes: {url: "https://notes.example/mcp", oauth: {}}
variants:
`

// TestLoadClientRules checks, rule by rule, what Load asks of a variant
// beyond its client's options schema: MST's own options (timeout,
// apiKeyEnv), the client's model providers and its own Check, and what
// only MST's proxy offers. Each problem comes with its place, and a value
// the schema refused is not refused again.
func TestLoadClientRules(t *testing.T) {
	t.Parallel()
	const proxyWords = "starts the servers itself, without MST's proxy, so it cannot rename tools, change their titles or parameter descriptions, run dry or inject faults"
	tests := []struct {
		name, variants, more string
		want                 []string // nil: the config loads
	}{
		{"a timeout of zero", `  v: {model: offline, servers: [weather], clientOptions: {timeout: 0s}}`, "",
			[]string{`eval.yaml:7:59: variants.v.clientOptions.timeout: "0s" would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)`}},
		{"a negative timeout", `  v: {model: offline, servers: [weather], clientOptions: {timeout: -1s}}`, "",
			[]string{`eval.yaml:7:59: variants.v.clientOptions.timeout: "-1s" is not a duration (write 90s or 5m)`}},
		{"a timeout that is no duration", `  v: {model: offline, servers: [weather], clientOptions: {timeout: soon}}`, "",
			[]string{`eval.yaml:7:59: variants.v.clientOptions.timeout: "soon" is not a duration (write 90s or 5m)`}},
		{"a timeout the schema refuses is refused once", `  v: {model: offline, servers: [weather], clientOptions: {timeout: 90}}`, "",
			[]string{`eval.yaml:7:59: variants.v.clientOptions.timeout: must be a duration with its unit, such as 90s or 2m, got the bare number 90 (write 90s for seconds)`}},
		{"an empty apiKeyEnv", `  v: {client: solo, model: offline, servers: [weather], clientOptions: {apiKeyEnv: ""}}`, "",
			[]string{`eval.yaml:7:73: variants.v.clientOptions.apiKeyEnv: "" is not a variable name`}},
		{"a timeout of an unknown client", `  v: {client: nosuch, model: offline, clientOptions: {timeout: 0s}}`, "",
			[]string{
				`eval.yaml:7:7: variants.v.client: unknown client "nosuch" (known: api, bare, chatgpt, codex-app, codex-cli, cowork, rich)`,
				`eval.yaml:7:55: variants.v.clientOptions.timeout: "0s" would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)`,
			}},
		{"a model of a provider the client does not run", `  v: {client: solo, model: openai/gpt-5, servers: [weather]}`, "",
			[]string{`eval.yaml:7:21: variants.v.model: client solo runs models of anthropic, offline, not "openai/gpt-5": write anthropic/MODEL`}},
		{"a model the schema refuses is refused once", `  v: {client: solo, model: acme/x, servers: [weather]}`, "",
			[]string{`eval.yaml:7:21: variants.v.model: must be "offline" or "<provider>/<model>" with provider anthropic, openai or google (such as "anthropic/claude-sonnet-4-5"), got string "acme/x"`}},
		{"a client with no model providers runs any", `  v: {model: openai/gpt-5}`, "", nil},
		{"the client's check names an option", `  v: {client: solo, model: offline, servers: [weather], clientOptions: {mode: bad}}`, "",
			[]string{`eval.yaml:7:73: variants.v.clientOptions.mode: solo has no mode bad: write fast or slow`}},
		{"the client's check about the model", `  v: {client: solo, model: offline/broken, servers: [weather]}`, "",
			[]string{`eval.yaml:7:3: variants.v: model offline/broken is broken: pick another`}},
		{"no client check of options the schema refused", `  v: {client: solo, model: offline/broken, servers: [weather], clientOptions: {mode: 5}}`, "",
			[]string{`eval.yaml:7:80: variants.v.clientOptions.mode: must be a string, got number 5`}},
		{"no client check of options MST refused", `  v: {client: solo, model: offline/broken, servers: [weather], clientOptions: {timeout: 0s}}`, "",
			[]string{`eval.yaml:7:80: variants.v.clientOptions.timeout: "0s" would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)`}},
		{"a connector server", `  v: {client: solo, model: offline, servers: [weather, notes]}`, "",
			[]string{`eval.yaml:7:3: variants.v: client solo starts the servers itself, without MST's proxy, so it cannot keep connector server notes's access token fresh during the run; use a client that takes MST's proxy (mst clients)`}},
		{"every server by default", `  v: {client: solo, model: offline}`, "",
			[]string{`eval.yaml:7:3: variants.v: client solo starts the servers itself, without MST's proxy, so it cannot keep connector server notes's access token fresh during the run; use a client that takes MST's proxy (mst clients)`}},
		{"a renamed tool", `  v: {client: solo, model: offline, servers: [weather], tools: {weather: {get: {name: fetch}}}}`, "",
			[]string{`eval.yaml:7:3: variants.v: client solo ` + proxyWords + ` (server weather); use a client that takes them (mst clients), or drop these settings from the variant`}},
		{"a new title", `  v: {client: solo, model: offline, servers: [weather], tools: {weather: {get: {title: Get}}}}`, "",
			[]string{`eval.yaml:7:3: variants.v: client solo ` + proxyWords + ` (server weather); use a client that takes them (mst clients), or drop these settings from the variant`}},
		{"a new description or a hidden tool needs no proxy", `  v: {client: solo, model: offline, servers: [weather], tools: {weather: {get: {description: Get it., hidden: true}}}}`, "", nil},
		{"a dry run", `  v: {client: solo, model: offline, servers: [weather], dryRun: declared}`, "",
			[]string{`eval.yaml:7:3: variants.v: client solo ` + proxyWords + ` (server weather); use a client that takes them (mst clients), or drop these settings from the variant`}},
		{"dryRun off needs no proxy", `  v: {client: solo, model: offline, servers: [weather], dryRun: "off"}`, "", nil},
		{"faults", `  v: {client: solo, model: offline, servers: [weather], faults: {weather: [{kind: error}]}}`, "",
			[]string{`eval.yaml:7:3: variants.v: client solo ` + proxyWords + ` (server weather); use a client that takes them (mst clients), or drop these settings from the variant`}},
		{"a cap on a server's calls", `  v: {client: solo, model: offline, servers: [weather]}`, "limits: {serverCalls: {weather: 2}}\n",
			[]string{`eval.yaml:7:3: variants.v: client solo starts the servers itself, without MST's proxy, so MST cannot count its tool calls to server weather (limits.serverCalls.weather); use a client that takes the proxy (mst clients), cap the server's trials with limits.servers instead, or leave the server out of the variant`}},
		{"a cap on a server the variant does not use", `  v: {client: solo, model: offline, servers: [weather]}`, "limits: {serverCalls: {notes: 2}}\n", nil},
		{"every problem of a variant at once", `  v: {client: solo, model: openai/gpt-5, dryRun: annotated, clientOptions: {timeout: 0s}}`, "limits: {serverCalls: {weather: 2}}\n",
			[]string{
				`eval.yaml:7:3: variants.v: client solo starts the servers itself, without MST's proxy, so MST cannot count its tool calls to server weather (limits.serverCalls.weather); use a client that takes the proxy (mst clients), cap the server's trials with limits.servers instead, or leave the server out of the variant`,
				`eval.yaml:7:3: variants.v: client solo starts the servers itself, without MST's proxy, so it cannot keep connector server notes's access token fresh during the run; use a client that takes MST's proxy (mst clients)`,
				`eval.yaml:7:3: variants.v: client solo ` + proxyWords + ` (server weather); use a client that takes them (mst clients), or drop these settings from the variant`,
				`eval.yaml:7:77: variants.v.clientOptions.timeout: "0s" would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)`,
				`eval.yaml:7:21: variants.v.model: client solo runs models of anthropic, offline, not "openai/gpt-5": write anthropic/MODEL`,
			}},
		{"a client that takes the proxy", `  v: {model: offline, dryRun: declared, tools: {weather: {get: {name: fetch}}}, faults: {weather: [{kind: error}]}}`, "limits: {serverCalls: {weather: 2}}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			content := clientsHead + tt.variants + "\n" + tt.more
			if tt.want == nil {
				dir := t.TempDir()
				writeFiles(t, dir, map[string]string{"eval.yaml": content, "cases.jsonl": "{}\n"})
				if _, err := Load(filepath.Join(dir, "eval.yaml"), clientCatalog{}); err != nil {
					t.Fatalf("Load(%s) = %v, want no error", tt.variants, err)
				}
				return
			}
			got := loadErrorsWith(t, clientCatalog{}, "eval.yaml", content)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load(%s) errors mismatch (-want +got):\n%s", tt.variants, diff)
			}
		})
	}
}

// TestLoadReportsSchemaAndClientProblemsTogether: a config with a problem
// of its shape (an unknown key) and problems only its clients can tell (a
// timeout of zero, a model of another provider) gets all of them from one
// Load, each with its line and column, sorted by path.
func TestLoadReportsSchemaAndClientProblemsTogether(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"eval.yaml", "eval.json"} {
		content := `name: t
datasets: [cases.jsonl]
servers:
  s: {command: echo}
variants:
  v: {client: api, model: offline, clientOptions: {timeout: "0s"}}
  w: {client: solo, model: openai/gpt-5}
unknownKey: 1
`
		want := []string{
			"eval.yaml:8:1: unknownKey: unknown key (known: datasets, description, graders, limits, name, plugins, results, servers, trials, variants)",
			`eval.yaml:6:52: variants.v.clientOptions.timeout: "0s" would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)`,
			`eval.yaml:7:21: variants.w.model: client solo runs models of anthropic, offline, not "openai/gpt-5": write anthropic/MODEL`,
		}
		if file == "eval.json" {
			content = `{"name": "t", "datasets": ["cases.jsonl"], "servers": {"s": {"command": "echo"}},
"variants": {
  "v": {"client": "api", "model": "offline", "clientOptions": {"timeout": "0s"}},
  "w": {"client": "solo", "model": "openai/gpt-5"}},
"unknownKey": 1}
`
			want = []string{
				"eval.json:5:1: unknownKey: unknown key (known: datasets, description, graders, limits, name, plugins, results, servers, trials, variants)",
				`eval.json:3:64: variants.v.clientOptions.timeout: "0s" would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)`,
				`eval.json:4:27: variants.w.model: client solo runs models of anthropic, offline, not "openai/gpt-5": write anthropic/MODEL`,
			}
		}
		got := loadErrorsWith(t, clientCatalog{}, file, content)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Load(%s with an unknown key, a zero timeout and a model of another provider) errors mismatch (-want +got):\n%s", file, diff)
		}
	}
}

// TestLiftOwnOptions checks the one reading of MST's own client options,
// which the plan uses for a case's overrides too: what it lifts out, and
// an error that starts with the option's name.
func TestLiftOwnOptions(t *testing.T) {
	t.Parallel()
	o, err := LiftOwnOptions(json.RawMessage(`{"timeout": "90s", "apiKeyEnv": "TEAM_KEY", "maxActions": 3}`))
	if err != nil || o.Timeout == nil || *o.Timeout != 90*time.Second || o.KeyEnv != "TEAM_KEY" || string(o.Rest) != `{"maxActions":3}` {
		t.Errorf("LiftOwnOptions(timeout, apiKeyEnv, maxActions) = %+v, %v; want 90s, TEAM_KEY and the rest", o, err)
	}
	if o, err := LiftOwnOptions(json.RawMessage(`{"timeout": "5m"}`)); err != nil || o.Rest != nil {
		t.Errorf("LiftOwnOptions(timeout alone) = %+v, %v; want no rest", o, err)
	}
	tests := []struct{ raw, option, want string }{
		{`{"timeout": "0s"}`, "timeout", `timeout: "0s" would let a trial run for ever`},
		{`{"timeout": 90}`, "timeout", "timeout: 90 is not a duration string (write 90s or 5m)"},
		{`{"timeout": "-5s"}`, "timeout", `timeout: "-5s" is not a duration (write 90s or 5m)`},
		{`{"apiKeyEnv": ""}`, "apiKeyEnv", `apiKeyEnv: "" is not a variable name`},
	}
	for _, tt := range tests {
		_, err := LiftOwnOptions(json.RawMessage(tt.raw))
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != tt.option || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("LiftOwnOptions(%s) = %v, want an OptionError of %s starting %q", tt.raw, err, tt.option, tt.want)
		}
	}
}
