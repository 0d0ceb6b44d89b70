package run_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/transcript"
)

// TestCaseShardsBalanced deals realistic case ids over 2 to 20 shards:
// every case gets one shard, and each shard's trials are within one
// case's trials of an even share, for every id class, case count and
// trials per case.
func TestCaseShardsBalanced(t *testing.T) {
	t.Parallel()
	for _, class := range splitIDClasses {
		for _, cases := range []int{14, 100, 1000} {
			ids := splitIDs(class, cases, 1)
			for _, trials := range []int{1, 3} {
				keys := splitKeys(ids, trials)
				perCase := 2 * trials
				for _, n := range []int{2, 4, 8, 16, 20} {
					where := run.CaseShards(keys, n)
					if len(where) != cases {
						t.Fatalf("CaseShards(%d %s cases, %d shards) places %d cases", cases, class, n, len(where))
					}
					counts := make([]int, n)
					for _, k := range keys {
						s, ok := where[k.Case]
						if !ok || s < 0 || s >= n {
							t.Fatalf("CaseShards(%d %s cases, %d shards)[%q] = %d, %v; want a shard in [0, %d)", cases, class, n, k.Case, s, ok, n)
						}
						counts[s]++
					}
					// Within one case of the ideal: max < ideal + perCase
					// and min > ideal - perCase, times n.
					total := len(keys)
					if hi, lo := slices.Max(counts), slices.Min(counts); hi*n >= total+perCase*n || lo*n <= total-perCase*n {
						t.Errorf("CaseShards(%d %s cases × %d trials, %d shards) gives shards %v trials: max %d, min %d, ideal %.1f; want each within %d of it",
							cases, class, perCase, n, counts, hi, lo, float64(total)/float64(n), perCase)
					}
					if got := run.ShardTrials(keys, n); !slices.Equal(got, counts) {
						t.Errorf("ShardTrials(%d %s cases, %d shards) = %v, want the split's %v", cases, class, n, got, counts)
					}
				}
			}
		}
	}
}

// TestCaseShardsUneven deals cases of different trial counts (what a
// resume has left): no shard has more trials than an even share plus the
// largest case's.
func TestCaseShardsUneven(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	for _, class := range splitIDClasses {
		for _, cases := range []int{14, 100, 1000} {
			keys := splitKeys(splitIDs(class, cases, 2), 3)
			// Drop about half of the trials at random.
			keys = slices.DeleteFunc(keys, func(transcript.Key) bool { return r.IntN(2) == 0 })
			perCase := map[string]int{}
			for _, k := range keys {
				perCase[k.Case]++
			}
			largest := slices.Max(slices.Collect(maps.Values(perCase)))
			for _, n := range []int{2, 4, 8, 16, 20} {
				counts := run.ShardTrials(keys, n)
				if hi := slices.Max(counts); hi*n >= len(keys)+largest*n {
					t.Errorf("ShardTrials(%d %s cases of 1 to 6 trials, %d shards) = %v: max %d, want under %.1f (an even share plus %d)",
						len(perCase), class, n, counts, hi, float64(len(keys))/float64(n)+float64(largest), largest)
				}
			}
		}
	}
}

// TestCaseShardsDeterministic deals the same cases given in other orders
// (shuffled, reversed, trials interleaved across cases): the split is the
// same, and it is the same on every call.
func TestCaseShardsDeterministic(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 3))
	for _, class := range splitIDClasses {
		for _, cases := range []int{14, 100, 1000} {
			keys := splitKeys(splitIDs(class, cases, 3), 3)
			for _, n := range []int{2, 4, 8, 16, 20} {
				want := run.CaseShards(keys, n)
				orders := map[string][]transcript.Key{"again": keys, "reversed": slices.Clone(keys)}
				slices.Reverse(orders["reversed"])
				for i := range 3 {
					s := slices.Clone(keys)
					r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
					orders[fmt.Sprint("shuffled ", i)] = s
				}
				for name, s := range orders {
					if got := run.CaseShards(s, n); !maps.Equal(got, want) {
						t.Errorf("CaseShards(%d %s cases %s, %d shards) differs from the same cases in plan order", cases, class, name, n)
					}
				}
			}
		}
	}
}

// TestCaseShardsStable pins where the quickstart's cases go on 4 shards
// and a few other splits: a resume deals a run's cases again to find
// where the first attempt put them (run.json records only the method),
// so the deal must never change under the name transcript.SplitDeal.
func TestCaseShardsStable(t *testing.T) {
	t.Parallel()
	got := run.CaseShards(splitKeys(quickstartCases, 1), 4)
	want := map[string]int{
		"humid-cairo": 0, "now-lisbon": 0, "off-topic": 0, "storm-north-sea": 0,
		"convert-c-to-f": 1, "rain-oslo": 1, "warmer-cairo-lisbon": 1, "weekend-tokyo": 1,
		"snow-reykjavik": 2, "tomorrow-oslo": 2, "which-places": 2,
		"alerts-alps": 3, "kelvin-to-c": 3, "unknown-city": 3,
	}
	if !maps.Equal(got, want) {
		t.Errorf("CaseShards(the quickstart's cases, 4 shards) = %v, want %v", got, want)
	}
	if got := run.CaseShards(nil, 4); len(got) != 0 {
		t.Errorf("CaseShards(no trials, 4 shards) = %v, want none", got)
	}
	for _, n := range []int{0, 1} {
		for c, s := range run.CaseShards(splitKeys(quickstartCases, 1), n) {
			if s != 0 {
				t.Errorf("CaseShards(the quickstart's cases, %d shards)[%q] = %d, want 0", n, c, s)
			}
		}
	}
}
