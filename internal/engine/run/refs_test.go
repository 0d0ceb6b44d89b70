package run_test

import (
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/store"
)

// refsEval runs the test server with its many tools (filler_03 …
// filler_42, a Unicode and a long name besides echo and the others) under
// two variants, one of which hides filler_07. GRADERS and EXPECT stand for
// the eval's graders and case a's expect list.
const refsEval = `
name: refs
datasets: [cases.jsonl]
servers:
  test: {command: SERVER, args: [--many]}
variants:
  v: {model: offline}
  w:
    model: offline
    tools:
      test:
        filler_07: {hidden: true}
graders: GRADERS
`

func refsFiles(graders, expect string) map[string]string {
	return map[string]string{
		"eval.yaml": strings.Replace(refsEval, "GRADERS", graders, 1),
		"cases.jsonl": `{"id": "a", "input": "Please echo 'a'", "expect": ` + expect + `}
{"id": "b", "input": "Please echo 'b'"}
`,
	}
}

// runners are the ways the refused run is tried: in process, and with a
// child mst collect per shard, which reads the bundle from disk.
var refsRunners = []struct {
	name string
	edit func(t *testing.T) func(*run.Options)
}{
	{"local", func(t *testing.T) func(*run.Options) { return nil }},
	{"processes", func(t *testing.T) func(*run.Options) {
		dir := t.TempDir()
		return func(o *run.Options) {
			o.Runner = runner.ProcessesDefinition()
			o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": dir}, Shards: 2, Keep: runner.KeepNever}
		}
	}},
}

// TestGradersNamingUnknownToolsAreRefused: a grader that names a tool or a
// server the variant does not have refuses the run at the readiness
// check, before any trial, whether it is one of the eval's graders or a
// case's expect, and whatever kind of mistake it is.
func TestGradersNamingUnknownToolsAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, graders, expect string
		want                  []string
	}{
		{"typo in toolNotCalled", `[{maxToolCalls: 3}, {toolNotCalled: filer_07}]`, `[]`,
			[]string{`graders[1] toolNotCalled "filer_07": no server of variant v offers a tool filer_07 (did you mean filler_07?)`,
				`graders[1] toolNotCalled "filer_07": no server of variant w offers a tool filer_07 (did you mean filler_07?)`}},
		{"typo in toolCalled", `[{toolCalled: ecno}]`, `[]`,
			[]string{`graders[0] toolCalled "ecno": no server of variant v offers a tool ecno (did you mean echo?)`}},
		{"unknown server in an expect", `[]`, `[{"toolCalled": {"tool": "echo", "server": "tset"}}]`,
			[]string{`cases.jsonl:1: case "a": expect[0] toolCalled "echo": variant v has no server tset (did you mean test?)`}},
		{"typo with a server", `[]`, `[{"toolNotCalled": {"tool": "filler_7", "server": "test"}}]`,
			[]string{`case "a": expect[0] toolNotCalled "filler_7": server test of variant w offers no tool filler_7 (did you mean filler_07 or filler_17 or filler_27 or filler_37?)`}},
		{"name as a client shows it", `[{toolCalled: mcp__test__echo}]`, `[]`,
			[]string{`graders[0] toolCalled "mcp__test__echo": no server of variant v offers a tool mcp__test__echo (did you mean echo? name a tool as its server lists it)`}},
		{"Unicode name sanitized", `[{toolNotCalled: m_t_o_pr_vision}]`, `[]`,
			[]string{`no server of variant v offers a tool m_t_o_pr_vision (did you mean météo_prévision? name a tool as its server lists it)`}},
	}
	for _, tt := range tests {
		for _, r := range refsRunners {
			t.Run(tt.name+"/"+r.name, func(t *testing.T) {
				t.Parallel()
				path := writeEval(t, refsFiles(tt.graders, tt.expect))
				p, err := run.NewPlan(t.Context(), request(path))
				if err != nil {
					t.Fatalf("NewPlan(%s) = %v", path, err)
				}
				st := &countingStore{Store: store.Dir{Root: t.TempDir(), Eval: "weather"}}
				o := options(st)
				if edit := r.edit(t); edit != nil {
					edit(&o)
				}
				out, err := run.Execute(t.Context(), p, o)
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				if out != nil {
					if out.Run.Counts.Answered+out.Run.Counts.Errored+out.Run.Counts.NoAnswer > 0 {
						t.Errorf("Execute(%s) ran trials %+v, want none", tt.name, out.Run.Counts)
					}
					for _, m := range out.Run.Runner.Machines {
						msg += "\n" + m.Error
					}
				}
				for _, want := range append([]string{"readiness check failed, no trial ran"}, tt.want...) {
					if !strings.Contains(msg, want) {
						t.Errorf("Execute(%s) = %q, want it to contain %q", tt.name, msg, want)
					}
				}
			})
		}
	}
}

// TestGradersNamingKnownToolsRun is the other side: graders that name
// tools the servers list (a hidden one, a Unicode name, on a named
// server) do not stop the run.
func TestGradersNamingKnownToolsRun(t *testing.T) {
	t.Parallel()
	graders := `[{toolNotCalled: filler_07}, {toolNotCalled: "météo_prévision"}, {toolCalled: {tool: echo, server: test}}]`
	expect := `[{"toolNotCalled": {"tool": "summarise_the_quarterly_inventory_of_a_warehouse_region", "server": "test"}}]`
	_, out, _ := newRun(t, writeEval(t, refsFiles(graders, expect)), nil)
	if diff := passes(out.Report); diff["v"] != [3]int{2, 2, 2} || diff["w"] != [3]int{2, 2, 2} {
		t.Errorf("Execute: passed, graded, trials per variant = %v, want 2 of 2 for v and w", diff)
	}
}
