package run

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/transcript"
)

// This file decides which shard runs each case (docs/design/017-balanced-split.md).
// A shard always holds whole cases, so the trials a report pairs run on
// one machine. A new run deals its cases (transcript.SplitDeal) so that no
// shard has more than one case's trials beyond an even share; run.json
// records the method and shard count, and a resume with that many shards
// deals the run's stored cases again to find where each case went.

// CaseShards splits the cases of keys over n shards by dealing them
// (transcript.SplitDeal): the cases, ordered by their number of trials in
// keys (most first), then by fnv64a of their id, then by id, go one by
// one to the shard with the fewest trials so far, the lowest index among
// equals. It returns the shard of every case of keys. The result depends
// only on the case ids, their trial counts and n, never on the order of
// keys; no shard gets more trials than an even share plus one case's. One
// shard or fewer: every case is on shard 0.
func CaseShards(keys []transcript.Key, n int) map[string]int {
	where, _ := deal(seriesOfKeys(keys), n)
	return where
}

// seriesOfKeys lists keys as series (of no particular setting).
func seriesOfKeys(keys []transcript.Key) []shard.Series {
	var list []shard.Series
	for _, k := range keys {
		list = shard.AppendTrial(list, shard.Planned{Key: k})
	}
	return list
}

// caseLoad is one case to deal: its id, the fnv64a of its id, its trials.
type caseLoad struct {
	id     string
	hash   uint64
	trials int
}

// deal is CaseShards, and a digest of its result: fnv64a over every case
// id and its shard, in the order they were dealt, as 16 hex digits.
func deal(todo []shard.Series, n int) (map[string]int, string) {
	n = max(n, 1)
	count := map[string]int{}
	for _, s := range todo {
		count[s.Case] += s.Count
	}
	cases := make([]caseLoad, 0, len(count))
	for id, trials := range count {
		h := fnv.New64a()
		h.Write([]byte(id))
		cases = append(cases, caseLoad{id: id, hash: h.Sum64(), trials: trials})
	}
	slices.SortFunc(cases, func(a, b caseLoad) int {
		if c := cmp.Compare(b.trials, a.trials); c != 0 {
			return c
		}
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	// Every shard starts empty, in index order: already a heap.
	loads := make(shardLoads, n)
	for i := range loads {
		loads[i].index = i
	}
	where := make(map[string]int, len(cases))
	digest := fnv.New64a()
	var buf [binary.MaxVarintLen64]byte
	for _, c := range cases {
		s := &loads[0]
		where[c.id] = s.index
		s.trials += c.trials
		heap.Fix(&loads, 0)
		digest.Write([]byte(c.id))
		digest.Write(buf[:binary.PutUvarint(buf[:], uint64(where[c.id])+1)])
	}
	return where, fmt.Sprintf("%016x", digest.Sum64())
}

// shardLoads is a min-heap of shards by trials so far, then index.
type shardLoads []struct{ trials, index int }

func (h shardLoads) Len() int { return len(h) }
func (h shardLoads) Less(i, j int) bool {
	return h[i].trials < h[j].trials || h[i].trials == h[j].trials && h[i].index < h[j].index
}
func (h shardLoads) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *shardLoads) Push(any)     { panic("shardLoads: fixed size") }
func (h *shardLoads) Pop() any     { panic("shardLoads: fixed size") }

// splitOf is what run.json records of the split for an attempt on n
// shards: the split itself (a new run's own deal; a resumed run keeps
// what it recorded, and a run from before MST recorded splits gets the
// rule it was split by written down), and the planned trials each shard gets
// at this count (nil for one shard). When a resume has the recorded shard
// count but cannot reproduce the recorded split, it says so on logger and
// deals the cases it still runs afresh (placement).
func (p *Plan) splitOf(n int, logger *slog.Logger) (*transcript.Split, []int) {
	n = max(n, 1)
	if p.Resume == nil {
		if n == 1 {
			return &transcript.Split{Method: transcript.SplitDeal, Shards: 1}, nil
		}
		all := p.Series()
		where, digest := deal(all, n)
		return &transcript.Split{Method: transcript.SplitDeal, Shards: n, Digest: digest}, countTrials(where, all, n)
	}
	s := p.Resume.Record.Runner.RecordedSplit()
	rec := &s
	if n == 1 {
		return rec, nil
	}
	all := p.Series()
	where, why := p.placement(rec, all, n)
	if why != "" && logger != nil {
		logger.Warn("the run's recorded split is not used: its remaining cases are dealt afresh over the shards", "shards", n, "reason", why)
	}
	return rec, countTrials(where, all, n)
}

// placement is the shard of every case of todo (trials of this plan) for
// an attempt on n shards, under the run's recorded split rec. With as
// many shards as rec records, each case goes where rec put it: rec's
// method applied again to every planned trial (p.Series), checked against
// rec's digest. With another shard count (or a split that cannot be
// reproduced: then why says so), the cases of todo are dealt afresh over
// n, balanced on the trials todo holds. Nil (every case on shard 0) for
// one shard.
func (p *Plan) placement(rec *transcript.Split, todo []shard.Series, n int) (where map[string]int, why string) {
	if n <= 1 {
		return nil, ""
	}
	if rec != nil && rec.Shards == n {
		switch rec.Method {
		case transcript.SplitMod:
			where = make(map[string]int)
			for _, s := range todo {
				where[s.Case] = shard.Assign(s.Case, n)
			}
			return where, ""
		case transcript.SplitDeal:
			all, digest := deal(p.Series(), n)
			if rec.Digest == "" || rec.Digest == digest {
				return all, ""
			}
			why = fmt.Sprintf("its stored cases deal to other shards than it recorded (digest %s, recorded %s): its cases file was changed", digest, rec.Digest)
		default:
			why = fmt.Sprintf("it records split method %q, which this MST does not know (it knows %s and %s)", rec.Method, transcript.SplitDeal, transcript.SplitMod)
		}
	}
	where, _ = deal(todo, n)
	return where, why
}

// countTrials counts the trials of todo on each of n shards under where.
func countTrials(where map[string]int, todo []shard.Series, n int) []int {
	out := make([]int, n)
	for _, s := range todo {
		out[where[s.Case]] += s.Count
	}
	return out
}
