package shard

import (
	"cmp"
	"slices"

	"github.com/mst-eval/mst/transcript"
)

// trialSet is what a coordinator knows of one shard's trials: which are
// planned (its bundle's), which the worker acquired, which it reported.
// With a bundle it keeps 5 bytes a trial beside the bundle's own list (the
// list's places sorted by key, and a state byte per place) and no map of
// keys, so that the coordinator's memory does not grow by a map entry and
// two copies of every key the worker names: a shard of 100,000 trials
// costs it half a megabyte. Without a bundle every key is planned, and
// the keys met are kept in a map.
type trialSet struct {
	keyAt func(i int) transcript.Key // the bundle's key at place i
	order []int32                    // places, sorted by key
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
		return &trialSet{loose: map[transcript.Key]uint8{}}
	}
	s := &trialSet{}
	n := len(b.Trials)
	if b.Grade != nil {
		trials := b.Grade.Trials
		s.keyAt, n = func(i int) transcript.Key { return trials[i] }, len(trials)
	} else {
		trials := b.Trials
		s.keyAt = func(i int) transcript.Key { return trials[i].Key }
	}
	s.order = make([]int32, n)
	for i := range s.order {
		s.order[i] = int32(i)
	}
	slices.SortFunc(s.order, func(a, b int32) int { return compareKeys(s.keyAt(int(a)), s.keyAt(int(b))) })
	s.state = make([]uint8, n)
	return s
}

func compareKeys(a, b transcript.Key) int {
	return cmp.Or(cmp.Compare(a.Case, b.Case), cmp.Compare(a.Variant, b.Variant), cmp.Compare(a.Trial, b.Trial))
}

// place finds k among the planned trials: its place, and whether it is
// planned. Without a bundle every key is, at place -1.
func (s *trialSet) place(k transcript.Key) (int, bool) {
	if s.loose != nil {
		return -1, true
	}
	i, ok := slices.BinarySearchFunc(s.order, k, func(p int32, k transcript.Key) int { return compareKeys(s.keyAt(int(p)), k) })
	if !ok {
		return 0, false
	}
	return int(s.order[i]), true
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
