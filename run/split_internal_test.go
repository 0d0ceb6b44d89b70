package run

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/transcript"
)

// TestPlacement places the remaining trials of a plan of 40 cases on 4
// shards under each kind of recorded split: the recorded deal (its
// digest right, or absent) and the old hash rule put every case where
// they did; a wrong digest, an unknown method or another shard count
// deal the remaining cases afresh, the first two saying why.
func TestPlacement(t *testing.T) {
	t.Parallel()
	var keys []transcript.Key
	for i := range 40 {
		for trial := 1; trial <= 3; trial++ {
			keys = append(keys, transcript.Key{Case: fmt.Sprintf("case-%02d", i), Variant: "v", Trial: trial})
		}
	}
	// What is left: the trials of every fourth case, and one trial of
	// case-01.
	var todo []transcript.Key
	for _, k := range keys {
		var i int
		fmt.Sscanf(k.Case, "case-%d", &i)
		if i%4 == 0 || k.Case == "case-01" && k.Trial == 1 {
			todo = append(todo, k)
		}
	}
	p := &Plan{Keys: keys}
	all, digest := deal(keys, 4)
	restrict := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for _, k := range todo {
			out[k.Case] = m[k.Case]
		}
		return out
	}
	mod := map[string]int{}
	for _, k := range todo {
		mod[k.Case] = shard.Assign(k.Case, 4)
	}
	fresh := CaseShards(todo, 4)
	if maps.Equal(fresh, restrict(all)) {
		t.Fatal("a fresh deal of the remaining cases agrees with the recorded one; the test needs them to differ")
	}
	tests := []struct {
		name string
		rec  *transcript.Split
		want map[string]int
		why  string
	}{
		{"the recorded deal", &transcript.Split{Method: transcript.SplitDeal, Shards: 4, Digest: digest}, restrict(all), ""},
		{"a deal recorded without a digest", &transcript.Split{Method: transcript.SplitDeal, Shards: 4}, restrict(all), ""},
		{"the old hash rule", &transcript.Split{Method: transcript.SplitMod, Shards: 4}, mod, ""},
		{"a wrong digest", &transcript.Split{Method: transcript.SplitDeal, Shards: 4, Digest: "0000000000000000"}, fresh, "cases file was changed"},
		{"an unknown method", &transcript.Split{Method: "by-duration", Shards: 4}, fresh, `split method "by-duration"`},
		{"another shard count", &transcript.Split{Method: transcript.SplitDeal, Shards: 2, Digest: digest}, fresh, ""},
		{"no record", nil, fresh, ""},
	}
	for _, tt := range tests {
		where, why := p.placement(tt.rec, todo, 4)
		if got := restrict(where); !maps.Equal(got, tt.want) {
			t.Errorf("placement(%s, 4 shards) = %v, want %v", tt.name, got, tt.want)
		}
		if tt.why == "" && why != "" || tt.why != "" && !strings.Contains(why, tt.why) {
			t.Errorf("placement(%s, 4 shards) says %q, want %q", tt.name, why, tt.why)
		}
	}
	if where, _ := p.placement(&transcript.Split{Method: transcript.SplitDeal, Shards: 1}, todo, 1); where != nil {
		t.Errorf("placement(one shard) = %v, want nil (all on shard 0)", where)
	}
}
