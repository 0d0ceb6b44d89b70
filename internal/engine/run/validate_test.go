package run_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// validEval is an eval of two cases and two variants on the offline model;
// w describes the echo tool in its own words.
var validEval = map[string]string{
	"eval.yaml": `
name: valid
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
  w:
    model: offline
    tools:
      test:
        echo: {description: "Repeat the text, word for word."}
`,
	"cases.jsonl": `{"id": "a", "input": "Please echo 'a'"}
{"id": "b", "input": "Please echo 'b'"}
`,
}

// TestExecuteRefusesBlankPlan changes a plan NewPlan made the way a Go
// program that builds or edits plans might, and checks that Execute
// refuses each change before anything starts (no runner is made, no run
// is stored, so no server or client opens), with an error that wraps
// ErrInvalid and says what is wrong, as a config or dataset file saying
// the same would be refused.
func TestExecuteRefusesBlankPlan(t *testing.T) {
	t.Parallel()
	path := writeEval(t, validEval)
	tests := []struct {
		name string
		edit func(p *run.Plan)
		want string
	}{
		{"blank case id", func(p *run.Plan) { p.Cases[0].ID = "  " }, "id is blank"},
		{"no case id", func(p *run.Plan) { p.Cases[1].ID = "" }, "Cases:2: id is blank"},
		{"blank prompt", func(p *run.Plan) { p.Cases[0].Input = "\t\n" }, "input is blank"},
		{"duplicate case ids", func(p *run.Plan) { p.Cases[1].ID = "a" }, "duplicate id"},
		{"no cases", func(p *run.Plan) { p.Cases = nil }, "holds no cases"},
		{"blank variant name", func(p *run.Plan) { p.Variants[0] = "" }, "Variants[0] is blank"},
		{"variant name a file may not hold", func(p *run.Plan) { p.Variants[0] = "v w" }, "may hold only"},
		{"variant twice", func(p *run.Plan) { p.Variants = []string{"v", "v"} }, "listed twice"},
		{"variant the config lacks", func(p *run.Plan) { p.Variants = append(p.Variants, "x") }, "has no variant x"},
		{"no variants", func(p *run.Plan) { p.Variants = nil }, "Variants is empty"},
		{"no trials", func(p *run.Plan) { p.Trials = 0 }, "Trials is 0"},
		{"no servers", func(p *run.Plan) { p.Settings[0].Servers = nil }, "no servers"},
		{"nameless server", func(p *run.Plan) { p.Settings[1].Servers[0].Name = "" }, "blank name"},
		{"server with no command", func(p *run.Plan) { p.Settings[1].Servers[0].Command = " " }, "neither a command nor a URL"},
		{"blank client", func(p *run.Plan) { p.Settings[0].Client = "" }, "the client is blank"},
		{"unknown client", func(p *run.Plan) { p.Settings[0].Client = "apii" }, `unknown client "apii"`},
		{"blank model", func(p *run.Plan) { p.Settings[0].Model = " " }, "the model is blank"},
		{"no settings", func(p *run.Plan) { p.Settings = nil }, "Settings is empty"},
		{"no config", func(p *run.Plan) { p.Config = nil }, "no eval config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := run.NewPlan(t.Context(), request(path))
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(p)
			st := &countingStore{Store: store.Dir{Root: t.TempDir(), Eval: "valid"}}
			o := options(st)
			var made atomic.Int32
			o.Runner = wrapRunner(o.Runner, func(r runner.Runner) runner.Runner { made.Add(1); return r })
			out, err := run.Execute(t.Context(), p, o)
			if err == nil || !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Execute(a plan with %s) = %v, %v; want an ErrInvalid that says %q", tt.name, out, err, tt.want)
			}
			if n := made.Load(); n != 0 || len(st.runs) != 0 {
				t.Errorf("Execute(a plan with %s) made %d runners and stored %d runs, want none", tt.name, n, len(st.runs))
			}
		})
	}
}

// TestExecuteGoBuiltPlan builds a plan in Go, without NewPlan, from the
// eval config NewPlan would load (its config, cases, variants and one
// setting per variant), and runs it: each variant's trials run with its
// own setting.
func TestExecuteGoBuiltPlan(t *testing.T) {
	t.Parallel()
	path := writeEval(t, validEval)
	made, err := run.NewPlan(t.Context(), request(path))
	if err != nil {
		t.Fatal(err)
	}
	p := &run.Plan{
		Config:   made.Config,
		Cases:    []dataset.Case{{ID: "only", Input: "Please echo 'only'"}},
		Variants: []string{"w", "v"},
		Trials:   1,
		// Out of the variants' order: each trial must find its own.
		Settings: []shard.Setting{made.Settings[0], made.Settings[1]},
	}
	st := &countingStore{Store: store.Dir{Root: t.TempDir(), Eval: "valid"}}
	out, err := run.Execute(t.Context(), p, options(st))
	if err != nil {
		t.Fatalf("Execute(a plan built in Go) = %v", err)
	}
	hashes := map[string]string{}
	for _, v := range []string{"v", "w"} {
		tr, err := out.Store.ReadTranscript(t.Context(), transcript.Key{Case: "only", Variant: v, Trial: 1})
		if err != nil {
			t.Fatalf("variant %s: %v", v, err)
		}
		if tr.Outcome.Status != transcript.Answered || len(tr.Servers) != 1 {
			t.Fatalf("variant %s: outcome %+v, servers %+v; want answered, with the test server", v, tr.Outcome, tr.Servers)
		}
		hashes[v] = tr.Servers[0].ToolsHash
	}
	if hashes["v"] == hashes["w"] {
		t.Errorf("variants v and w were offered the same tools (hash %s): w's trial did not run with w's setting", hashes["v"])
	}
	bad := *p
	bad.Settings = append(p.Settings, p.Settings[0])
	if _, err := run.Execute(context.WithoutCancel(t.Context()), &bad, options(st)); err == nil || !strings.Contains(err.Error(), "variant v has 2 settings") {
		t.Errorf("Execute(a Go plan with two settings for one variant) = %v, want it refused", err)
	}
}
