package run_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/transcript"
)

// splitIDSets is how many id sets of each class the figures are taken
// over: the old rule's imbalance depends on the ids themselves.
const splitIDSets = 20

// splitShardCounts are the shard counts the figures are printed for.
var splitShardCounts = []int{2, 4, 8, 16, 20}

// splitModTrials counts each shard's trials under the old rule, fnv64a(case
// id) mod n (shard.Assign).
func splitModTrials(keys []transcript.Key, n int) []int {
	out := make([]int, n)
	for _, k := range keys {
		out[shard.Assign(k.Case, n)]++
	}
	return out
}

// splitImbalance is the most trials on one shard over the mean (all n shards
// counted): at a fixed trial time and one trial at a time per shard, the
// run's wall time over the ideal one.
func splitImbalance(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	return float64(slices.Max(counts)) * float64(len(counts)) / float64(total)
}

// splitMedian is the median of xs (which it sorts).
func splitMedian(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// BenchmarkSplitBalance prints how uneven the old split (fnv64a mod N)
// and the deal (CaseShards) leave shards, as max/mean trials per shard,
// for realistic case ids: slugs, numbered ids, UUIDs, Unicode and long
// path-like ids; 14, 100 and 1000 cases; 2 variants × 1 and 3 trials; 2
// to 20 shards. Each cell is "old median/worst → new worst" over 20 id
// sets of the class. 1.00 is an even split; whole cases cannot do better
// than ceil(cases/shards)/(cases/shards), which the deal always reaches
// when every case has as many trials. It asserts nothing:
//
//	go test ./run/ -run '^$' -bench SplitBalance -benchtime 1x
func BenchmarkSplitBalance(b *testing.B) {
	for _, class := range splitIDClasses {
		// One sub-benchmark per class: a benchmark's log is cut at ten
		// lines.
		b.Run("ids="+class, func(b *testing.B) { splitBalance(b, class) })
	}
}

func splitBalance(b *testing.B, class string) {
	type row struct {
		label string
		cells []string
		worse float64 // the old rule's median over the deal's, at 8 shards
	}
	var rows []row
	for b.Loop() {
		rows = rows[:0]
		for _, cases := range []int{14, 100, 1000} {
			sets := make([][]string, splitIDSets)
			for s := range sets {
				sets[s] = splitIDs(class, cases, uint64(s)+1)
			}
			for _, trials := range []int{1, 3} {
				r := row{label: fmt.Sprintf("%-8s %4d cases × %d", class, cases, 2*trials)}
				for _, n := range splitShardCounts {
					var mod []float64
					dealt := 0.0
					for _, ids := range sets {
						keys := splitKeys(ids, trials)
						mod = append(mod, splitImbalance(splitModTrials(keys, n)))
						dealt = max(dealt, splitImbalance(run.ShardTrials(keys, n)))
					}
					med := splitMedian(mod)
					r.cells = append(r.cells, fmt.Sprintf("%.2f/%.2f→%.2f", med, mod[len(mod)-1], dealt))
					if n == 8 {
						r.worse = med / dealt
					}
				}
				rows = append(rows, r)
			}
		}
	}
	var head strings.Builder
	fmt.Fprintf(&head, "max/mean trials per shard: old mod N (median/worst of %d id sets) → deal (worst)\n%-24s", splitIDSets, "ids, cases × trials")
	for _, n := range splitShardCounts {
		fmt.Fprintf(&head, " %16s", fmt.Sprintf("%d shards", n))
	}
	head.WriteString("   old/deal at 8")
	lines := []string{head.String()}
	for _, r := range rows {
		var l strings.Builder
		fmt.Fprintf(&l, "%-24s", r.label)
		for _, c := range r.cells {
			fmt.Fprintf(&l, " %16s", c)
		}
		fmt.Fprintf(&l, "   %.2f", r.worse)
		lines = append(lines, l.String())
	}
	b.Log("\n" + strings.Join(lines, "\n"))
}

// BenchmarkSplitHeadline simulates the seed's headline job: 450 desktop
// trials of 68 s each on 20 shards, one trial at a time per shard (a
// desktop runs one conversation at once), so a shard takes its trials ×
// 68 s and the run as long as its fullest shard. The 450 trials are made
// of cases of several sizes (cases × variants × trials); slug ids, 20 id
// sets. It prints the projected wall time of the old split (median and
// worst) and of the deal against the ideal (450 × 68 s / 20) and against
// the best whole cases allow:
//
//	go test ./run/ -run '^$' -bench SplitHeadline -benchtime 1x
func BenchmarkSplitHeadline(b *testing.B) {
	const (
		total  = 450
		shards = 20
		trial  = 68 * time.Second
	)
	ideal := time.Duration(total) * trial / shards
	type shape struct{ cases, variants, trials int }
	shapes := []shape{{450, 1, 1}, {225, 2, 1}, {150, 3, 1}, {75, 3, 2}, {50, 3, 3}}
	var lines []string
	for b.Loop() {
		lines = lines[:0]
		lines = append(lines, fmt.Sprintf("450 trials × 68 s on 20 shards, one at a time: ideal %s", splitMinutes(ideal)))
		for _, sh := range shapes {
			var mod []float64
			var dealt int
			for s := range splitIDSets {
				var keys []transcript.Key
				for _, id := range splitIDs("slug", sh.cases, uint64(s)+1) {
					for v := range sh.variants {
						for i := 1; i <= sh.trials; i++ {
							keys = append(keys, transcript.Key{Case: id, Variant: fmt.Sprint("v", v), Trial: i})
						}
					}
				}
				mod = append(mod, float64(slices.Max(splitModTrials(keys, shards))))
				dealt = max(dealt, slices.Max(run.ShardTrials(keys, shards)))
			}
			perCase := sh.variants * sh.trials
			best := (sh.cases + shards - 1) / shards * perCase
			med, worst := time.Duration(splitMedian(mod))*trial, time.Duration(mod[len(mod)-1])*trial
			deal := time.Duration(dealt) * trial
			lines = append(lines, fmt.Sprintf("%3d cases × %d variants × %d trials: old %s median (%.2f× ideal), %s worst (%.2f×); deal %s (%.2f×; best whole cases allow %s); old/deal %.2f",
				sh.cases, sh.variants, sh.trials, splitMinutes(med), float64(med)/float64(ideal), splitMinutes(worst), float64(worst)/float64(ideal),
				splitMinutes(deal), float64(deal)/float64(ideal), splitMinutes(time.Duration(best)*trial), float64(med)/float64(deal)))
		}
	}
	b.Log("\n" + strings.Join(lines, "\n"))
}

func splitMinutes(d time.Duration) string { return fmt.Sprintf("%.1f min", d.Minutes()) }

// BenchmarkSplitCost times the deal of 1,000 to 100,000 cases of 6
// trials over 20 shards: what a new run and a resume on the recorded
// shard count pay to place every case.
//
//	go test ./run/ -run '^$' -bench SplitCost
func BenchmarkSplitCost(b *testing.B) {
	for _, cases := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(cases), func(b *testing.B) {
			keys := splitKeys(splitIDs("slug", cases, 1), 3)
			b.ReportAllocs()
			for b.Loop() {
				run.CaseShards(keys, 20)
			}
		})
	}
}
