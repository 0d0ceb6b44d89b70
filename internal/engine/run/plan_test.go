package run_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// planRequest is the request of `mst validate`: no runner OS, so no
// client's OS or installed CLI is checked (claude-code need not be
// installed here).
func planRequest(path string) run.Request {
	req := request(path)
	req.OS, req.ThisMachine, req.Secrets = "", false, nil
	return req
}

// setting is what a test compares of a shard.Setting: options as text.
type setting struct {
	Variant, Client, Model, Provider string
	Options                          string
	Timeout                          time.Duration
	KeyEnv                           string
}

func settingsOf(p *run.Plan) []setting {
	var out []setting
	for _, s := range p.Settings {
		out = append(out, setting{s.Variant, s.Client, s.Model, s.Provider, string(s.Options), s.Timeout, s.KeyEnv})
	}
	return out
}

func TestNewPlanSettings(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: settings
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  plain: {model: offline}
  slow: {model: offline, clientOptions: {timeout: 2m, maxActions: 5}}
  keyed: {model: anthropic/claude-sonnet-4-5, clientOptions: {apiKeyEnv: MY_KEY, timeout: 1m}}
`,
		"cases.jsonl": `{"id": "shared", "input": "Please echo 'a'"}
{"id": "quick", "input": "Please echo 'b'", "clientOptions": {"timeout": "5s"}}
{"id": "other-model", "input": "Please echo 'c'", "model": "openai/gpt-5"}
{"id": "actions", "input": "Please echo 'd'", "clientOptions": {"maxActions": 2}}
`,
	})
	p, err := run.NewPlan(t.Context(), planRequest(path))
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	want := []setting{
		// One per variant: the api client's default timeout is 300s.
		{Variant: "plain", Client: "api", Model: "offline", Provider: "offline", Timeout: 300 * time.Second},
		{Variant: "slow", Client: "api", Model: "offline", Provider: "offline", Options: `{"maxActions":5}`, Timeout: 2 * time.Minute},
		{Variant: "keyed", Client: "api", Model: "anthropic/claude-sonnet-4-5", Provider: "anthropic", Timeout: time.Minute, KeyEnv: "MY_KEY"},
		// quick: its timeout replaces the variant's; the variant's other
		// options and apiKeyEnv stay.
		{Variant: "plain", Client: "api", Model: "offline", Provider: "offline", Timeout: 5 * time.Second},
		{Variant: "slow", Client: "api", Model: "offline", Provider: "offline", Options: `{"maxActions":5}`, Timeout: 5 * time.Second},
		{Variant: "keyed", Client: "api", Model: "anthropic/claude-sonnet-4-5", Provider: "anthropic", Timeout: 5 * time.Second, KeyEnv: "MY_KEY"},
		// other-model: the model and its provider change, nothing else.
		{Variant: "plain", Client: "api", Model: "openai/gpt-5", Provider: "openai", Timeout: 300 * time.Second},
		{Variant: "slow", Client: "api", Model: "openai/gpt-5", Provider: "openai", Options: `{"maxActions":5}`, Timeout: 2 * time.Minute},
		{Variant: "keyed", Client: "api", Model: "openai/gpt-5", Provider: "openai", Timeout: time.Minute, KeyEnv: "MY_KEY"},
		// actions: the case's option replaces the variant's; the variant's
		// own keys stay typed.
		{Variant: "plain", Client: "api", Model: "offline", Provider: "offline", Options: `{"maxActions":2}`, Timeout: 300 * time.Second},
		{Variant: "slow", Client: "api", Model: "offline", Provider: "offline", Options: `{"maxActions":2}`, Timeout: 2 * time.Minute},
		{Variant: "keyed", Client: "api", Model: "anthropic/claude-sonnet-4-5", Provider: "anthropic", Options: `{"maxActions":2}`, Timeout: time.Minute, KeyEnv: "MY_KEY"},
	}
	if diff := cmp.Diff(want, settingsOf(p)); diff != "" {
		t.Errorf("NewPlan(%s).Settings (-want +got):\n%s", path, diff)
	}
	for _, s := range p.Settings {
		for _, own := range []string{"timeout", "apiKeyEnv"} {
			if strings.Contains(string(s.Options), own) {
				t.Errorf("NewPlan(%s): setting of %s has options %s, want no %s (it is MST's own)", path, s.Variant, s.Options, own)
			}
		}
		if len(s.Servers) != 1 || s.Servers[0].Name != "test" || s.Servers[0].Command != testServer {
			t.Errorf("NewPlan(%s): setting of %s has servers %+v, want the test server", path, s.Variant, s.Servers)
		}
	}

	// Which setting each trial runs with: shared uses its variant's.
	tests := []struct {
		key  transcript.Key
		want int
	}{
		{transcript.Key{Case: "shared", Variant: "plain", Trial: 1}, 0},
		{transcript.Key{Case: "shared", Variant: "keyed", Trial: 1}, 2},
		{transcript.Key{Case: "quick", Variant: "slow", Trial: 1}, 4},
		{transcript.Key{Case: "other-model", Variant: "keyed", Trial: 1}, 8},
		{transcript.Key{Case: "actions", Variant: "plain", Trial: 1}, 9},
	}
	for _, tt := range tests {
		i, s := p.Setting(tt.key)
		if i != tt.want || s != &p.Settings[tt.want] {
			t.Errorf("Plan.Setting(%s) = %d, want %d", tt.key, i, tt.want)
		}
	}
}

func TestNewPlanClientDefaultTimeout(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: claude
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  cc: {client: claude-code, model: anthropic/claude-sonnet-4-5}
  cc-slow: {client: claude-code, model: anthropic/claude-sonnet-4-5, clientOptions: {timeout: 10m}}
`,
		"cases.jsonl": `{"id": "a", "input": "hi"}
{"id": "b", "input": "hi", "clientOptions": {"timeout": "30s"}}
`,
	})
	p, err := run.NewPlan(t.Context(), planRequest(path))
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	var got []time.Duration
	for _, s := range p.Settings {
		got = append(got, s.Timeout)
		if strings.Contains(string(s.Options), "timeout") {
			t.Errorf("NewPlan(%s): setting of %s has options %s, want no timeout", path, s.Variant, s.Options)
		}
	}
	// claude-code's definition gives 180s; the variant's and the case's
	// clientOptions.timeout override it.
	want := []time.Duration{180 * time.Second, 10 * time.Minute, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewPlan(%s) timeouts (-want +got):\n%s", path, diff)
	}
}

// selectionEval has two variants, zeta before alpha, three cases and two
// trials per case.
const selectionEval = `
name: selection
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  zeta: {model: offline}
  alpha: {model: offline}
trials: 2
`

const selectionCases = `{"id": "c1", "input": "one"}
{"id": "c2", "input": "two"}
{"id": "c3", "input": "three"}
`

func TestNewPlanSelection(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{"eval.yaml": selectionEval, "cases.jsonl": selectionCases})
	type plan struct {
		Cases, Variants []string
		Trials, Keys    int
	}
	tests := []struct {
		sel     transcript.Selection
		want    plan
		wantErr string
	}{
		{sel: transcript.Selection{}, want: plan{[]string{"c1", "c2", "c3"}, []string{"zeta", "alpha"}, 2, 12}},
		{sel: transcript.Selection{Variants: []string{"alpha"}}, want: plan{[]string{"c1", "c2", "c3"}, []string{"alpha"}, 2, 6}},
		// The file's order, not the flags'.
		{sel: transcript.Selection{Variants: []string{"alpha", "zeta"}}, want: plan{[]string{"c1", "c2", "c3"}, []string{"zeta", "alpha"}, 2, 12}},
		{sel: transcript.Selection{Cases: []string{"c3", "c1"}}, want: plan{[]string{"c1", "c3"}, []string{"zeta", "alpha"}, 2, 8}},
		{sel: transcript.Selection{Limit: 2}, want: plan{[]string{"c1", "c2"}, []string{"zeta", "alpha"}, 2, 8}},
		{sel: transcript.Selection{Cases: []string{"c2", "c3"}, Limit: 1}, want: plan{[]string{"c2"}, []string{"zeta", "alpha"}, 2, 4}},
		{sel: transcript.Selection{Trials: 5, Variants: []string{"zeta"}, Cases: []string{"c2"}}, want: plan{[]string{"c2"}, []string{"zeta"}, 5, 5}},
		{sel: transcript.Selection{Variants: []string{"alpha", "nosuch"}}, wantErr: "--variant nosuch: no such variant in " + path + " (it has: zeta, alpha)"},
		{sel: transcript.Selection{Cases: []string{"c4"}}, wantErr: `unknown case "c4"`},
		{sel: transcript.Selection{Trials: -1}, wantErr: "--trials and --limit take a positive number"},
		{sel: transcript.Selection{Limit: -3}, wantErr: "--trials and --limit take a positive number"},
	}
	for _, tt := range tests {
		req := planRequest(path)
		req.Selection = tt.sel
		p, err := run.NewPlan(t.Context(), req)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, run.ErrInvalid) {
				t.Errorf("NewPlan(%+v) = %v, want an ErrInvalid containing %q", tt.sel, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewPlan(%+v) = %v", tt.sel, err)
			continue
		}
		got := plan{Variants: p.Variants, Trials: p.Trials, Keys: len(p.Keys())}
		for _, c := range p.Cases {
			got.Cases = append(got.Cases, c.ID)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("NewPlan(%+v) (-want +got):\n%s", tt.sel, diff)
		}
		if diff := cmp.Diff(tt.sel, p.Selection); diff != "" {
			t.Errorf("NewPlan(%+v).Selection (-want +got):\n%s", tt.sel, diff)
		}
		if diff := cmp.Diff(p.Keys(), p.Todo()); diff != "" {
			t.Errorf("NewPlan(%+v).Todo() of a new run (-Keys +Todo):\n%s", tt.sel, diff)
		}
	}
}

func TestNewPlanKeysOrder(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{"eval.yaml": selectionEval, "cases.jsonl": selectionCases})
	req := planRequest(path)
	req.Selection = transcript.Selection{Cases: []string{"c1", "c2"}}
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	// Case by case, so a case's variants and trials run close together.
	want := []transcript.Key{
		{Case: "c1", Variant: "zeta", Trial: 1}, {Case: "c1", Variant: "zeta", Trial: 2},
		{Case: "c1", Variant: "alpha", Trial: 1}, {Case: "c1", Variant: "alpha", Trial: 2},
		{Case: "c2", Variant: "zeta", Trial: 1}, {Case: "c2", Variant: "zeta", Trial: 2},
		{Case: "c2", Variant: "alpha", Trial: 1}, {Case: "c2", Variant: "alpha", Trial: 2},
	}
	if diff := cmp.Diff(want, p.Keys()); diff != "" {
		t.Errorf("NewPlan(2 cases, 2 variants, 2 trials).Keys (-want +got):\n%s", diff)
	}
}

func TestNewPlanRefuses(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{"eval.yaml": selectionEval, "cases.jsonl": selectionCases})
	// A stored run made from another config.
	st, err := store.Dir{Root: t.TempDir(), Eval: "weather"}.Create(t.Context(), "old", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteRun(t.Context(), transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "old", ConfigFile: path, ConfigHash: "0123456789abcdef0123", Variants: []string{"zeta"}, Trials: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteCases(t.Context(), []dataset.Case{{ID: "c1", Input: "one"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(*run.Request)
		wantErr string
		is      error
	}{
		{"retry without resume", func(r *run.Request) { r.RetryErrored = true }, "--retry-errored goes with --resume RUN", run.ErrInvalid},
		{"resume with --variant", func(r *run.Request) { r.Resume, r.Selection.Variants = st, []string{"zeta"} }, "--resume runs the run's own plan", run.ErrInvalid},
		{"resume with --case", func(r *run.Request) { r.Resume, r.Selection.Cases = st, []string{"c1"} }, "--resume runs the run's own plan", run.ErrInvalid},
		{"resume with --trials", func(r *run.Request) { r.Resume, r.Selection.Trials = st, 1 }, "--resume runs the run's own plan", run.ErrInvalid},
		{"resume with --limit", func(r *run.Request) { r.Resume, r.Selection.Limit = st, 1 }, "--resume runs the run's own plan", run.ErrInvalid},
		{"resume of a changed config", func(r *run.Request) { r.Resume = st }, "run old was made from a config with hash 0123456789ab…", run.ErrConfigChanged},
		{"resume of a changed config, run's own file", func(r *run.Request) { r.Resume, r.ConfigFile = st, "" }, "resume it with the config it ran with", run.ErrConfigChanged},
		{"no config", func(r *run.Request) { r.ConfigFile = path + ".missing" }, "no such file", run.ErrInvalid},
	}
	for _, tt := range tests {
		req := planRequest(path)
		tt.edit(&req)
		_, err := run.NewPlan(t.Context(), req)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.is) || !errors.Is(err, run.ErrInvalid) {
			t.Errorf("NewPlan(%s) = %v, want an error wrapping %v and ErrInvalid containing %q", tt.name, err, tt.is, tt.wantErr)
		}
	}
}

func TestNewPlanBadGraders(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: graders
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
`,
		"cases.jsonl": `{"id": "fine", "input": "one", "expect": [{"answerContains": "x"}]}
{"id": "bad-kind", "input": "two", "expect": [{"answerSmells": "x"}]}
{"id": "bad-arg", "input": "three", "expect": [{"maxToolCalls": "many"}]}
`,
	})
	_, err := run.NewPlan(t.Context(), planRequest(path))
	if err == nil || !errors.Is(err, run.ErrInvalid) {
		t.Fatalf("NewPlan(%s) = %v, want an ErrInvalid naming the bad cases", path, err)
	}
	// Every bad case is reported, with its file, line and id.
	for _, want := range []string{`cases.jsonl:2: case "bad-kind": expect`, `cases.jsonl:3: case "bad-arg": expect`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewPlan(%s) = %v, want it to contain %q", path, err, want)
		}
	}
	if strings.Contains(err.Error(), `"fine"`) {
		t.Errorf("NewPlan(%s) = %v, want no word of the good case", path, err)
	}
}

func TestNewPlanKeyVars(t *testing.T) {
	t.Parallel()
	const cases = `{"id": "a", "input": "hi"}`
	tests := []struct {
		name     string
		variants string
		cases    string
		want     []string
	}{
		{"offline", `v: {model: offline}`, cases, nil},
		{"anthropic", `v: {model: anthropic/claude-sonnet-4-5}`, cases, []string{"ANTHROPIC_API_KEY"}},
		{"openai", `v: {model: openai/gpt-5}`, cases, []string{"OPENAI_API_KEY"}},
		{"apiKeyEnv", `v: {model: anthropic/claude-sonnet-4-5, clientOptions: {apiKeyEnv: TEAM_KEY}}`, cases, []string{"TEAM_KEY"}},
		{"claude-code", `v: {client: claude-code, model: anthropic/claude-sonnet-4-5}`, cases, []string{"ANTHROPIC_API_KEY"}},
		{"several, once each", "a: {model: openai/gpt-5}\n  b: {model: offline}\n  c: {model: openai/gpt-5-mini}\n  d: {client: claude-code, model: anthropic/claude-sonnet-4-5}",
			cases, []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}},
		{"a case's model", `v: {model: offline}`, `{"id": "a", "input": "hi", "model": "openai/gpt-5"}`, []string{"OPENAI_API_KEY"}},
		{"a case's apiKeyEnv", `v: {model: openai/gpt-5}`, `{"id": "a", "input": "hi", "clientOptions": {"apiKeyEnv": "CASE_KEY"}}`, []string{"OPENAI_API_KEY", "CASE_KEY"}},
	}
	for _, tt := range tests {
		path := writeEval(t, map[string]string{
			"eval.yaml":   "name: keys\ndatasets: [cases.jsonl]\nservers:\n  test: {command: SERVER}\nvariants:\n  " + tt.variants + "\n",
			"cases.jsonl": tt.cases + "\n",
		})
		p, err := run.NewPlan(t.Context(), planRequest(path))
		if err != nil {
			t.Errorf("NewPlan(%s) = %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, p.KeyVars, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("NewPlan(%s).KeyVars (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestNewPlanKeysFromEnv(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: env
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  a: {model: anthropic/claude-sonnet-4-5}
  o: {model: openai/gpt-5}
  t: {model: openai/gpt-5, clientOptions: {apiKeyEnv: TEAM_KEY}}
`,
		"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
	})
	set, err := secrets.Parse("secrets.env", strings.NewReader("ANTHROPIC_API_KEY=from-the-file\nOTHER=kept-as-is\nTEAM_KEY=team-from-the-file\n"))
	if err != nil {
		t.Fatal(err)
	}
	req := planRequest(path)
	req.Secrets = set
	req.Env = map[string]string{
		"ANTHROPIC_API_KEY": "from-the-environment",
		"OPENAI_API_KEY":    "openai-from-env",
		"UNRELATED_TOKEN":   "not-a-client-key",
		"TEAM_KEY":          "",
	}
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	if diff := cmp.Diff([]string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TEAM_KEY"}, p.KeyVars); diff != "" {
		t.Errorf("NewPlan(%s).KeyVars (-want +got):\n%s", path, diff)
	}
	// The file wins; the environment adds only the key variables set, not
	// empty ones nor others.
	want := map[string]string{"ANTHROPIC_API_KEY": "from-the-file", "OPENAI_API_KEY": "openai-from-env", "OTHER": "kept-as-is", "TEAM_KEY": "team-from-the-file"}
	if diff := cmp.Diff(want, set.Env()); diff != "" {
		t.Errorf("NewPlan(%s): secrets (-want +got):\n%s", path, diff)
	}
}

func TestNewPlanLongAndUnicodeIDs(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a-very-long-case-id-", 20)
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: ids
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  meteo: {model: offline}
`,
		"cases.jsonl": `{"id": "東京の天気 ☀️", "input": "hi", "clientOptions": {"maxActions": 3}}
{"id": "` + long + `", "input": "hi"}
`,
	})
	p, err := run.NewPlan(t.Context(), planRequest(path))
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	want := []transcript.Key{{Case: "東京の天気 ☀️", Variant: "meteo", Trial: 1}, {Case: long, Variant: "meteo", Trial: 1}}
	if diff := cmp.Diff(want, p.Keys()); diff != "" {
		t.Errorf("NewPlan(%s).Keys (-want +got):\n%s", path, diff)
	}
	if i, s := p.Setting(want[0]); i != 1 || string(s.Options) != `{"maxActions":3}` {
		t.Errorf("Plan.Setting(%s) = %d %s, want the case's own setting 1", want[0], i, s.Options)
	}
	if i, _ := p.Setting(want[1]); i != 0 {
		t.Errorf("Plan.Setting(%s) = %d, want the variant's 0", want[1], i)
	}
}

func TestNewPlanChecksOnlySelectedVariants(t *testing.T) {
	t.Parallel()
	// cc needs the Claude Code CLI, which need not be installed here; a run
	// of --variant offline alone must not need it.
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: check
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  offline: {model: offline}
  cc: {client: claude-code, model: anthropic/claude-sonnet-4-5, clientOptions: {command: /nonexistent/claude}}
`,
		"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
	})
	req := request(path)
	if _, err := run.NewPlan(t.Context(), req); err == nil || !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), "variants.cc") {
		t.Errorf("NewPlan(all variants, this machine) = %v, want an ErrInvalid naming variants.cc", err)
	}
	req.Selection.Variants = []string{"offline"}
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(--variant offline) = %v, want no check of variant cc", err)
	}
	if diff := cmp.Diff([]string{"offline"}, p.Variants); diff != "" {
		t.Errorf("NewPlan(--variant offline).Variants (-want +got):\n%s", diff)
	}
}

// TestNewPlanMissingKeys: a variant whose model needs its provider's key,
// set neither in MST's environment nor in the secrets file, fails the plan
// before anything opens, naming the variable and the file.
func TestNewPlanMissingKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		variants string
		env      map[string]string
		file     string // secrets file contents, "" for no file
		want     []string
	}{
		{"no key anywhere", `v: {model: anthropic/claude-sonnet-4-5}`, nil, "",
			[]string{"variants.v", "ANTHROPIC_API_KEY", "no --secrets-file was given", "apiKeyEnv"}},
		{"not in the file either", `v: {model: openai/gpt-5}`, nil, "OTHER=other-value\n",
			[]string{"variants.v", "OPENAI_API_KEY", "secrets file secrets.env", "baseURL"}},
		{"apiKeyEnv names the variable", `v: {model: openai/gpt-5, clientOptions: {apiKeyEnv: TEAM_KEY}}`, map[string]string{"OPENAI_API_KEY": "key-value"}, "",
			[]string{"variants.v", "TEAM_KEY"}},
		{"every variant is named", "a: {model: anthropic/claude-sonnet-4-5}\n  b: {model: offline}\n  c: {model: openai/gpt-5}", nil, "",
			[]string{"variants.a", "variants.c", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"}},
		{"in the environment", `v: {model: anthropic/claude-sonnet-4-5}`, map[string]string{"ANTHROPIC_API_KEY": "key-value"}, "", nil},
		{"in the file", `v: {model: anthropic/claude-sonnet-4-5}`, nil, "ANTHROPIC_API_KEY=key-value\n", nil},
		{"offline needs none", `v: {model: offline}`, nil, "", nil},
		{"a keyless OpenAI-compatible server", `v: {model: openai/llama3, clientOptions: {baseURL: "http://127.0.0.1:11434/v1", api: chat}}`, nil, "", nil},
		{"a CLI client logs in by itself", `v: {client: claude-code, model: anthropic/claude-sonnet-4-5}`, nil, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeEval(t, map[string]string{
				"eval.yaml":   "name: keys\ndatasets: [cases.jsonl]\nservers:\n  test: {command: SERVER}\nvariants:\n  " + tt.variants + "\n",
				"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
			})
			req := planRequest(path)
			req.Secrets, req.Env = secrets.New(), tt.env
			if tt.file != "" {
				set, err := secrets.Parse("secrets.env", strings.NewReader(tt.file))
				if err != nil {
					t.Fatal(err)
				}
				req.Secrets, req.SecretsFile = set, "secrets.env"
			}
			_, err := run.NewPlan(t.Context(), req)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewPlan = %v, want no error", err)
				}
				return
			}
			if err == nil || !errors.Is(err, run.ErrInvalid) {
				t.Fatalf("NewPlan = %v, want an invalid-input error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewPlan error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestNewPlanFallbackTimeout: a client whose definition gives no timeout (one
// from outside MST) still gets one, so no trial runs without a deadline.
func TestNewPlanFallbackTimeout(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml":   "name: fallback\ndatasets: [cases.jsonl]\nservers:\n  test: {command: SERVER}\nvariants:\n  v: {client: untimed, model: offline}\n",
		"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
	})
	api, err := builtin.Clients().Lookup("api")
	if err != nil {
		t.Fatal(err)
	}
	untimed := *api
	untimed.Name, untimed.Timeout = "untimed", 0
	req := planRequest(path)
	req.Clients = client.NewRegistry(&untimed)
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	if got := p.Settings[0].Timeout; got != run.FallbackTimeout {
		t.Errorf("NewPlan(%s): a client with no default timeout gets %v, want run.FallbackTimeout (%v)", path, got, run.FallbackTimeout)
	}

	// A timeout of zero is refused: it would mean none.
	path = writeEval(t, map[string]string{
		"eval.yaml":   "name: zero\ndatasets: [cases.jsonl]\nservers:\n  test: {command: SERVER}\nvariants:\n  v: {model: offline, clientOptions: {timeout: 0s}}\n",
		"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
	})
	if _, err := run.NewPlan(t.Context(), planRequest(path)); err == nil || !strings.Contains(err.Error(), "for ever") {
		t.Errorf("NewPlan(timeout: 0s) = %v, want an error saying a trial would run for ever", err)
	}
}
