package shard

import (
	"cmp"
	"slices"

	"github.com/mst-eval/mst/transcript"
)

// trialSet is what a coordinator knows of one shard's trials: which are
// planned (its bundle's), which the worker acquired, which it reported.
// With a bundle it keeps one state byte a trial and, for a collect
// bundle, an index of its series (a grade bundle lists keys: their
// places, sorted); no map of keys, so that the coordinator's memory does
// not grow by a map entry and two copies of every key the worker names:
// a shard of 100,000 trials costs it a tenth of a megabyte. Without a
// bundle every key is planned, and the keys met are kept in a map.
type trialSet struct {
	place func(k transcript.Key) (int, bool) // k's place among the planned trials
	state []uint8

	loose map[transcript.Key]uint8 // without a bundle
}

// The states of a trial.
const (
	trialTaken    uint8 = 1 << iota // acquired by the worker
	trialReported                   // its report was accepted
)

// newTrialSet indexes b's trials; b may be nil.
func newTrialSet(b *Bundle) *trialSet {
	if b == nil {
		// Every key is planned, at place -1.
		return &trialSet{loose: map[transcript.Key]uint8{}, place: func(transcript.Key) (int, bool) { return -1, true }}
	}
	s := &trialSet{state: make([]uint8, b.Size())}
	if b.Grade != nil {
		s.place = keyPlaces(b.Grade.Trials)
	} else {
		s.place = seriesPlaces(b.Series)
	}
	return s
}

// keyPlaces finds a key among keys by binary search over their places,
// sorted by key.
func keyPlaces(keys []transcript.Key) func(transcript.Key) (int, bool) {
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareKeys(keys[a], keys[b]) })
	return func(k transcript.Key) (int, bool) {
		i, ok := slices.BinarySearchFunc(order, k, func(p int32, k transcript.Key) int { return compareKeys(keys[p], k) })
		if !ok {
			return 0, false
		}
		return int(order[i]), true
	}
}

// seriesPlaces finds a key among the trials of list (numbered in list's
// order) by binary search over the series, sorted by case, variant and
// first trial.
func seriesPlaces(list []Series) func(transcript.Key) (int, bool) {
	start := make([]int, len(list)) // the place of each series' first trial
	order := make([]int32, len(list))
	n := 0
	for i, s := range list {
		start[i], order[i] = n, int32(i)
		n += s.Count
	}
	head := func(s Series) transcript.Key { return transcript.Key{Case: s.Case, Variant: s.Variant, Trial: s.First} }
	slices.SortFunc(order, func(a, b int32) int { return compareKeys(head(list[a]), head(list[b])) })
	return func(k transcript.Key) (int, bool) {
		// The last series whose first trial is at k or before it.
		i, found := slices.BinarySearchFunc(order, k, func(p int32, k transcript.Key) int { return compareKeys(head(list[p]), k) })
		if !found {
			i--
		}
		if i < 0 || !list[order[i]].Has(k) {
			return 0, false
		}
		return start[order[i]] + k.Trial - list[order[i]].First, true
	}
}

func compareKeys(a, b transcript.Key) int {
	return cmp.Or(cmp.Compare(a.Case, b.Case), cmp.Compare(a.Variant, b.Variant), cmp.Compare(a.Trial, b.Trial))
}

// planned reports whether k is one of the shard's trials.
func (s *trialSet) planned(k transcript.Key) bool {
	_, ok := s.place(k)
	return ok
}

// has reports whether k, a planned trial, is in state st.
func (s *trialSet) has(k transcript.Key, st uint8) bool {
	if s.loose != nil {
		return s.loose[k]&st != 0
	}
	i, ok := s.place(k)
	return ok && s.state[i]&st != 0
}

// mark puts k, a planned trial, in state st.
func (s *trialSet) mark(k transcript.Key, st uint8) {
	if s.loose != nil {
		s.loose[k] |= st
		return
	}
	if i, ok := s.place(k); ok {
		s.state[i] |= st
	}
}
