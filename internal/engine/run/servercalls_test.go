package run_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/engine/run"
)

// TestNewPlanServerCalls checks that limits.serverCalls reaches the
// settings the workers get: each setting lists the caps of its own
// servers only, case settings included; and that a variant whose client
// starts its servers itself, without MST's proxy (which counts the calls),
// is refused when one of its servers has a call cap.
func TestNewPlanServerCalls(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: calls
datasets: [cases.jsonl]
servers:
  capped: {command: SERVER}
  free: {command: SERVER}
variants:
  both: {model: offline}
  one: {model: offline, servers: [free]}
limits:
  serverCalls: {capped: 3}
`,
		"cases.jsonl": `{"id": "a", "input": "hi"}
{"id": "b", "input": "hi", "clientOptions": {"timeout": "30s"}}
`,
	})
	p, err := run.NewPlan(t.Context(), planRequest(path))
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	got := map[string][]map[string]int{}
	for _, s := range p.Settings {
		got[s.Variant] = append(got[s.Variant], s.CallLimits)
	}
	want := map[string][]map[string]int{
		"both": {{"capped": 3}, {"capped": 3}},
		"one":  {nil, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewPlan(limits.serverCalls: {capped: 3}) settings' CallLimits (-want +got):\n%s", diff)
	}

	// The same eval with a client that takes no proxy.
	req := planRequest(path)
	api, err := req.Clients.Lookup("api")
	if err != nil {
		t.Fatal(err)
	}
	bare := *api
	bare.Name, bare.ProxiedServers = "bare", false
	req.Clients.Add(&bare)
	bareEval := writeEval(t, map[string]string{
		"eval.yaml": `
name: calls
datasets: [cases.jsonl]
servers:
  capped: {command: SERVER}
variants:
  v: {client: bare, model: offline}
limits:
  serverCalls: {capped: 3}
`,
		"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
	})
	req.ConfigFile = bareEval
	_, err = run.NewPlan(t.Context(), req)
	if err == nil || !strings.Contains(err.Error(), "variants.v: client bare starts the servers itself") || !strings.Contains(err.Error(), "limits.serverCalls.capped") {
		t.Errorf("NewPlan(client bare without proxy, limits.serverCalls.capped) = %v, want a refusal naming the variant, the client and the limit", err)
	}
}
