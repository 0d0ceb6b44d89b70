package run

import (
	"github.com/mst-eval/mst/transcript"
)

// ShardTrials counts how many of keys each of n shards gets when their
// cases are dealt over n shards (CaseShards), by shard index, zeros
// included; nil for one shard. run.json records it, and the report shows
// it, so a user can see how evenly a shard count divides an eval's cases.
func ShardTrials(keys []transcript.Key, n int) []int {
	if n <= 1 {
		return nil
	}
	list := seriesOfKeys(keys)
	where, _ := deal(list, n)
	return countTrials(where, list, n)
}
