package run_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/store"
)

// TestCheckWithoutOS checks that a runner whose machines' OS is unknown
// until hello (ssh, gcloud: Request.OS empty) gets every load-time check
// that does not need the OS: a config refused on a known OS for a reason
// of its own is refused the same way on an unknown one.
func TestCheckWithoutOS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, variants, wantErr string
	}{
		{"a model of a provider the client does not run", "v: {client: claude-code, model: openai/gpt-4o}", "variants.v.model: client claude-code runs models of anthropic"},
		{"an option the desktop client does not take", "v: {client: chatgpt, model: openai/gpt-4o, clientOptions: {reasoningEffort: high}}", "reasoningEffort"},
		{"a client that does not exist", "v: {client: nosuch, model: offline}", "nosuch"},
	}
	for _, tt := range tests {
		path := writeEval(t, map[string]string{
			"eval.yaml":   "name: check\ndatasets: [cases.jsonl]\nservers:\n  test: {command: SERVER}\nvariants:\n  " + tt.variants + "\n",
			"cases.jsonl": `{"id": "c1", "input": "one"}` + "\n",
		})
		for _, goos := range []string{"linux", ""} {
			req := planRequest(path)
			req.OS = goos
			_, err := run.NewPlan(t.Context(), req)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewPlan(%s, OS %q) = %v, want an error containing %q", tt.name, goos, err, tt.wantErr)
			}
		}
	}
}

// TestCheckMachine checks the OS checks that wait for hello: a bundle's
// variant whose client does not run on the worker's OS is refused, with
// the config's place, and the others pass.
func TestCheckMachine(t *testing.T) {
	t.Parallel()
	reg := builtin.Clients()
	b := &shard.Bundle{Settings: []shard.Setting{
		{Variant: "cc", Client: "claude-code"},
		{Variant: "app", Client: "chatgpt"},
		{Variant: "cc", Client: "claude-code"}, // a case's own setting
	}}
	err := run.CheckMachine("eval.yaml", reg, b, "windows")
	if err == nil || !strings.Contains(err.Error(), "eval.yaml: variants.app.client: client chatgpt runs on macos, linux; this run's machine is windows") || strings.Contains(err.Error(), "variants.cc") {
		t.Errorf("CheckMachine(claude-code and chatgpt on windows) = %v, want chatgpt refused alone, with its place", err)
	}
	if err := run.HelloCheck("eval.yaml", reg)(&shard.Bundle{Settings: b.Settings[:1]}, &protocol.Hello{OS: "windows"}); err != nil {
		t.Errorf("HelloCheck(claude-code, hello from windows) = %v, want nil", err)
	}
}

// TestRunRefusesWorkerOS checks the whole path: a plan made without the
// machines' OS (as for ssh) passes, and the coordinator refuses at hello
// a worker whose OS the variant's client does not allow, before any
// trial: the shard is recorded as failed with the reason, no transcript
// is written.
func TestRunRefusesWorkerOS(t *testing.T) {
	t.Parallel()
	reg := builtin.Clients()
	api, err := reg.Lookup("api")
	if err != nil {
		t.Fatal(err)
	}
	other := "plan9"
	if runtime.GOOS == other {
		other = "linux"
	}
	api.Requirements.OS = []string{other}
	path := writeEval(t, map[string]string{"eval.yaml": selectionEval, "cases.jsonl": selectionCases})
	req := request(path)
	req.OS, req.ThisMachine, req.Clients = "", false, reg
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(api allowed on %s only, OS unknown) = %v, want a plan: the OS is checked at hello", other, err)
	}
	o := options(store.Dir{Root: t.TempDir(), Eval: "weather"})
	o.Clients = reg
	// Every shard failed before any trial: Execute says so, with the
	// run it recorded.
	out, err := run.Execute(t.Context(), p, o)
	if err == nil || !strings.Contains(err.Error(), "cannot run this shard, no trial ran") || out == nil {
		t.Fatalf("Execute(api on %s, worker on %s) = %v, %v; want the run and the refusal as its error", other, runtime.GOOS, out, err)
	}
	ms := out.Run.Runner.Machines
	if len(ms) != 1 || ms[0].Ended != "failed" || !strings.Contains(ms[0].Error, "variants.zeta.client: client api runs on "+other) || ms[0].OS != runtime.GOOS {
		t.Errorf("Execute(api on %s, worker on %s) machines = %+v, want one failed at hello naming the variant and its client", other, runtime.GOOS, ms)
	}
	keys, err := out.Store.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("Execute(a refused worker) stored transcripts of %v, want none", keys)
	}
}
