package run_test

import (
	"slices"
	"testing"

	"github.com/mst-eval/mst/internal/engine/run"
)

// quickstartCases are the ids of the quickstart's fourteen cases, which
// the deal spreads 4/4/3/3 over four shards (where their hash mod 4 put
// 1/8/4/1).
var quickstartCases = []string{"rain-oslo", "weekend-tokyo", "snow-reykjavik", "tomorrow-oslo", "unknown-city", "now-lisbon",
	"humid-cairo", "warmer-cairo-lisbon", "storm-north-sea", "alerts-alps", "convert-c-to-f", "kelvin-to-c", "which-places", "off-topic"}

// TestShardTrials counts each shard's trials under the split, zeros
// included, and nothing for one shard.
func TestShardTrials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cases  []string
		trials int
		shards int
		want   []int
	}{
		{quickstartCases, 1, 4, []int{8, 8, 6, 6}},
		{quickstartCases, 3, 4, []int{24, 24, 18, 18}},
		{quickstartCases, 1, 16, []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0}},
		{quickstartCases, 1, 1, nil},
		{quickstartCases, 1, 0, nil},
		{quickstartCases[:1], 1, 3, nil}, // filled in below: one case, one shard holds all
		{nil, 1, 4, []int{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		got := run.ShardTrials(splitKeys(tt.cases, tt.trials), tt.shards)
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
	_, out, _ := newRun(t, splitEval(t), splitOnProcesses(t, 4))
	want := []int{8, 8, 6, 6}
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
