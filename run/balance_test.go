package run_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/transcript"
)

// quickstartCases are the ids of the quickstart's fourteen cases, which
// the case hash spreads 1/8/4/1 over four shards.
var quickstartCases = []string{"rain-oslo", "weekend-tokyo", "snow-reykjavik", "tomorrow-oslo", "unknown-city", "now-lisbon",
	"humid-cairo", "warmer-cairo-lisbon", "storm-north-sea", "alerts-alps", "convert-c-to-f", "kelvin-to-c", "which-places", "off-topic"}

// TestShardTrials counts each shard's trials under the case hash, zeros
// included, and nothing for one shard.
func TestShardTrials(t *testing.T) {
	t.Parallel()
	keys := func(cases []string, trials int) []transcript.Key {
		var out []transcript.Key
		for _, c := range cases {
			for _, v := range []string{"v", "w"} {
				for i := 1; i <= trials; i++ {
					out = append(out, transcript.Key{Case: c, Variant: v, Trial: i})
				}
			}
		}
		return out
	}
	tests := []struct {
		cases  []string
		trials int
		shards int
		want   []int
	}{
		{quickstartCases, 1, 4, []int{2, 16, 8, 2}},
		{quickstartCases, 3, 4, []int{6, 48, 24, 6}},
		{quickstartCases, 1, 1, nil},
		{quickstartCases, 1, 0, nil},
		{quickstartCases[:1], 1, 3, nil}, // filled in below: one case, one shard holds all
		{nil, 1, 4, []int{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		got := run.ShardTrials(keys(tt.cases, tt.trials), tt.shards)
		if len(tt.cases) == 1 {
			if len(got) != 3 || slices.Max(got) != 2 || sum(got) != 2 {
				t.Errorf("ShardTrials(one case, 2 trials, 3 shards) = %v, want one shard with 2 and two with 0", got)
			}
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ShardTrials(%d cases × 2 variants × %d, %d shards) = %v, want %v", len(tt.cases), tt.trials, tt.shards, got, tt.want)
		}
	}
}

// TestShardTrialsRecorded runs the quickstart's fourteen cases on four
// processes shards: run.json records what each shard was given, the same
// as its machine's trials, and the report shows it.
func TestShardTrialsRecorded(t *testing.T) {
	t.Parallel()
	var cases strings.Builder
	for _, c := range quickstartCases {
		fmt.Fprintf(&cases, "{\"id\": %q, \"input\": \"Please echo '%s'\"}\n", c, c)
	}
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: balance
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
trials: 2
`,
		"cases.jsonl": cases.String(),
	})
	_, out, _ := newRun(t, path, func(o *run.Options) {
		o.Runner = runner.ProcessesDefinition()
		o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: 4, Keep: runner.KeepNever}
	})
	want := []int{2, 16, 8, 2}
	stored, err := out.Store.ReadRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Runner.ShardTrials; !slices.Equal(got, want) {
		t.Errorf("run.json's runner.shardTrials = %v, want %v", got, want)
	}
	machines := make([]int, 4)
	for _, m := range stored.Runner.Machines {
		machines[m.Shard] += m.Trials
	}
	if !slices.Equal(machines, want) {
		t.Errorf("run.json's machines were given %v trials by shard, want %v", machines, want)
	}
	if got := out.Report.Run.ShardTrials; !slices.Equal(got, want) {
		t.Errorf("the report's shardTrials = %v, want %v", got, want)
	}
}

func sum(s []int) int {
	n := 0
	for _, x := range s {
		n += x
	}
	return n
}
