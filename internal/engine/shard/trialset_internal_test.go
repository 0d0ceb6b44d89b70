package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mst-eval/mst/transcript"
)

// TestSeriesRoundTrip lists random trials (cases with odd ids, trials out
// of order, gaps, replaced ones, settings) as series and back: the trials
// come back as given, in order, and a trial set finds each at its place
// and no trial that is not planned.
func TestSeriesRoundTrip(t *testing.T) {
	t.Parallel()
	ids := []string{"a", "b", "a-b", "a_b", "é", "日本語", "case/with/slashes", "", fmt.Sprint(rand.Int())}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var trials []Planned
		seen := map[transcript.Key]bool{}
		for range rng.IntN(60) {
			k := transcript.Key{Case: ids[rng.IntN(len(ids))], Variant: []string{"v", "w"}[rng.IntN(2)], Trial: 1 + rng.IntN(8)}
			if seen[k] {
				continue
			}
			seen[k] = true
			trials = append(trials, Planned{Key: k, Setting: rng.IntN(2), Replace: rng.IntN(4) == 0})
		}
		if rng.IntN(2) == 0 {
			slices.SortFunc(trials, func(a, b Planned) int { return compareKeys(a.Key, b.Key) }) // long series
		}
		b := &Bundle{Series: SeriesOf(trials...)}
		if got := slices.Collect(b.Trials()); !slices.Equal(got, trials) {
			t.Fatalf("seed %d: the trials of SeriesOf(%v) = %v", seed, trials, got)
		}
		if b.Size() != len(trials) || len(b.Series) > len(trials) {
			t.Fatalf("seed %d: %d trials make %d series of %d trials", seed, len(trials), len(b.Series), b.Size())
		}
		set := newTrialSet(b)
		for i, pt := range trials {
			if b.Trial(i) != pt {
				t.Fatalf("seed %d: Trial(%d) = %v, want %v", seed, i, b.Trial(i), pt)
			}
			if at, ok := set.place(pt.Key); !ok || at != i {
				t.Fatalf("seed %d: place(%v) = %d, %t; want %d", seed, pt.Key, at, ok, i)
			}
		}
		for range 50 {
			k := transcript.Key{Case: ids[rng.IntN(len(ids))], Variant: []string{"v", "w", "x"}[rng.IntN(3)], Trial: rng.IntN(10)}
			if _, ok := set.place(k); ok != seen[k] {
				t.Fatalf("seed %d: place(%v) found it: %t, want %t", seed, k, ok, seen[k])
			}
		}
	}
}

// TestSeriesCompact: a run's trials of one case and setting, in order,
// are one series however many there are.
func TestSeriesCompact(t *testing.T) {
	t.Parallel()
	var list []Series
	for c := range 3 {
		for i := 1; i <= 100_000; i++ {
			list = AppendTrial(list, Planned{Key: transcript.Key{Case: fmt.Sprint(c), Variant: "v", Trial: i}})
		}
	}
	if len(list) != 3 || CountTrials(list) != 300_000 {
		t.Errorf("300,000 trials of 3 cases make %d series of %d trials, want 3 of 300,000", len(list), CountTrials(list))
	}
}
