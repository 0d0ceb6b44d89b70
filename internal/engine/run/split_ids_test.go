package run_test

import (
	"github.com/mst-eval/mst/internal/ground/caseids"
	"github.com/mst-eval/mst/transcript"
)

// splitIDClasses are kinds of case ids found in real datasets, for the
// split's tests and benchmarks (internal/ground/caseids makes them).
var splitIDClasses = caseids.Classes

// splitIDs returns n distinct case ids of a class, the same for the same
// class, n and seed.
func splitIDs(class string, n int, seed uint64) []string { return caseids.Make(class, n, seed) }

// splitKeys are the trial keys of cases, each under variants "a" and
// "b" with trials trials: case by case, as a plan orders them.
func splitKeys(cases []string, trials int) []transcript.Key {
	var out []transcript.Key
	for _, c := range cases {
		for _, v := range []string{"a", "b"} {
			for i := 1; i <= trials; i++ {
				out = append(out, transcript.Key{Case: c, Variant: v, Trial: i})
			}
		}
	}
	return out
}
