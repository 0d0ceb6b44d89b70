package report_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

// TestShardBalance checks that a run of several shards shows, in its JSON
// and on one line of its text, how many trials each shard was given:
// what run.json records, or what the first attempt's machines say for a
// run recorded without it. A run of one shard shows no such line.
func TestShardBalance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		runner transcript.RunnerInfo
		want   []int
		line   string
	}{
		{"recorded", transcript.RunnerInfo{Shards: 4, ShardTrials: []int{2, 16, 8, 2}},
			[]int{2, 16, 8, 2}, "Shards    4 (trials per shard 2/16/8/2)"},
		{"recorded, with an empty shard", transcript.RunnerInfo{Shards: 3, ShardTrials: []int{0, 20, 8}},
			[]int{0, 20, 8}, "Shards    3 (trials per shard 0/20/8)"},
		{"from the machines", transcript.RunnerInfo{Shards: 4, Machines: []transcript.Machine{
			{Shard: 0, Trials: 2, Attempt: 1}, {Shard: 1, Trials: 16, Attempt: 1}, {Shard: 3, Trials: 2, Attempt: 1},
			// A resume's machines ran only what was left.
			{Shard: 1, Trials: 3, Attempt: 2},
		}}, []int{2, 16, 0, 2}, "Shards    4 (trials per shard 2/16/0/2)"},
		{"one shard", transcript.RunnerInfo{Shards: 1, Machines: []transcript.Machine{{Shard: 0, Trials: 28, Attempt: 1}}}, nil, ""},
		{"no runner recorded", transcript.RunnerInfo{}, nil, ""},
	}
	for _, tt := range tests {
		in := makeRun("r", []string{"a"}, []string{"c1", "c2"}, 1, func(ci, vi, n int) int { return 0 }).in
		in.Run.Runner = tt.runner
		rep := report.Build(in)
		if !slices.Equal(rep.Run.ShardTrials, tt.want) {
			t.Errorf("%s: report's shardTrials = %v, want %v", tt.name, rep.Run.ShardTrials, tt.want)
		}
		var text bytes.Buffer
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		line := ""
		for l := range strings.Lines(text.String()) {
			if strings.HasPrefix(l, "Shards") {
				line = strings.TrimSpace(l)
			}
		}
		if line != tt.line {
			t.Errorf("%s: the text's shards line is %q, want %q\n%s", tt.name, line, tt.line, text.String())
		}
	}
}
