package run_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/run"
)

// TestNewPlanReportsConfigProblemsTogether: the problems of a config's
// shape (an unknown key) and those only its clients can tell (a timeout of
// zero, a model of another provider, an option the client's own check
// refuses, a dry run for a client without MST's proxy, a malformed
// ${secret:...} reference, a judge of a provider MST lacks) come from one
// NewPlan, as the loader's Errors, each with its line and column, sorted
// by path.
func TestNewPlanReportsConfigProblemsTogether(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `name: t
datasets: [cases.jsonl]
servers:
  s: {env: {TOKEN: "${secret:bad-name}"}, command: SERVER}
variants:
  v: {client: api, model: offline, clientOptions: {timeout: "0s"}}
  cc: {client: claude-code, model: openai/gpt-4o}
  url: {client: claude-code, model: anthropic/claude-sonnet-4-5, clientOptions: {baseURL: "https://gateway.example/v1"}}
  dry: {client: bare, model: offline, dryRun: declared}
graders:
  - judge: {rubric: supported, model: antrhopic/claude}
unknownKey: 1
`,
		"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
	})
	req := planRequest(path)
	api, err := req.Clients.Lookup("api")
	if err != nil {
		t.Fatal(err)
	}
	bare := *api
	bare.Name, bare.ProxiedServers = "bare", false
	req.Clients.Add(&bare)
	_, err = run.NewPlan(t.Context(), req)
	var es eval.Errors
	if !errors.Is(err, run.ErrInvalid) || !errors.As(err, &es) {
		t.Fatalf("NewPlan = %v, want an ErrInvalid holding eval.Errors", err)
	}
	var got []string
	for _, e := range es {
		if e.Line == 0 || e.Col == 0 {
			t.Errorf("NewPlan error %q has no line and column", e)
		}
		got = append(got, strings.TrimPrefix(e.Error(), filepath.Dir(path)+string(filepath.Separator)))
	}
	want := []string{
		`eval.yaml:11:5: graders[0]: judge supported by antrhopic/claude: unknown provider "antrhopic" (known: anthropic, google, offline, openai)`,
		"eval.yaml:4:13: servers.s.env.TOKEN: a ${secret:...} reference is malformed: write ${secret:NAME}, NAME as the secrets file spells it (letters, digits and _)",
		"eval.yaml:12:1: unknownKey: unknown key (known: datasets, description, graders, limits, name, plugins, results, servers, trials, variants)",
		`eval.yaml:7:29: variants.cc.model: client claude-code runs models of anthropic, not "openai/gpt-4o": write anthropic/MODEL`,
		"eval.yaml:9:3: variants.dry: client bare starts the servers itself, without MST's proxy, so it cannot rename tools, change their titles or parameter descriptions, run dry or inject faults (server s); use a client that takes them (mst clients), or drop these settings from the variant",
		`eval.yaml:8:82: variants.url.clientOptions.baseURL: the path of "https://gateway.example/v1" ends in /v1, but the Claude Code CLI appends /v1/messages to the base URL itself, so its requests would go to /v1/v1/messages; drop /v1: write "https://gateway.example"`,
		`eval.yaml:6:52: variants.v.clientOptions.timeout: "0s" would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewPlan errors (-want +got):\n%s", diff)
	}
}

// TestNewPlanCaseOwnOptions: a case's own clientOptions go through the
// same rule of MST's own options as a variant's (eval.LiftOwnOptions), and
// are reported at the case.
func TestNewPlanCaseOwnOptions(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml":   "name: t\ndatasets: [cases.jsonl]\nservers:\n  s: {command: SERVER}\nvariants:\n  v: {model: offline}\n",
		"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n" + `{"id": "b", "input": "hi", "clientOptions": {"timeout": "0s"}}` + "\n",
	})
	_, err := run.NewPlan(t.Context(), planRequest(path))
	want := `cases.jsonl:2: case "b": clientOptions.timeout: "0s" would let a trial run for ever`
	if !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("NewPlan(a case with timeout 0s) = %v, want an ErrInvalid containing %q", err, want)
	}
}
