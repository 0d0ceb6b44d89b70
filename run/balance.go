package run

import (
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/transcript"
)

// ShardTrials counts how many of keys each of n shards gets under the
// case-hash split (shard.Assign), by shard index, zeros included; nil for
// one shard. run.json records it, and the report shows it, so a user can
// see how evenly a shard count divides an eval's cases.
func ShardTrials(keys []transcript.Key, n int) []int {
	if n <= 1 {
		return nil
	}
	out := make([]int, n)
	for _, k := range keys {
		out[shard.Assign(k.Case, n)]++
	}
	return out
}
