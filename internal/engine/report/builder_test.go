package report

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/transcript"
)

// TestBuilderOrder adds the same trials in many orders, some twice and
// some outside the plan, and wants one report, to the last digit: a run
// reports its trials as they come back, a stored run in the order its
// store lists them.
func TestBuilderOrder(t *testing.T) {
	in := Input{Run: transcript.Run{ID: "r", Variants: []string{"terse", "clear"}, Trials: 3}}
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range 9 {
		id := fmt.Sprintf("case-%d-é", c)
		in.Cases = append(in.Cases, id)
		for _, v := range in.Run.Variants {
			for trial := 1; trial <= 3; trial++ {
				if c == 8 && trial == 3 {
					continue // an incomplete case
				}
				score := math.Round(rng.Float64()*400)/100 + 1
				if rng.IntN(7) == 0 {
					score = math.NaN() // the judge errored
				}
				tr := judged(id, v, trial, map[string]float64{"x": score})
				tr.DurationMs = rng.Float64() * 1000
				tr.InputTokens, tr.OutputTokens = int64(rng.IntN(500)), int64(rng.IntN(50))
				switch rng.IntN(9) {
				case 0:
					tr.Status, tr.Cause, tr.Detail, tr.Graded, tr.Passed = transcript.Errored, transcript.CauseProvider, "429", false, false
				case 1:
					tr.Passed = false
				}
				in.Trials = append(in.Trials, tr)
			}
		}
	}
	// A repeat and trials outside the plan are ignored wherever they come.
	in.Trials = append(in.Trials, in.Trials[3],
		Trial{Key: transcript.Key{Case: "nope", Variant: "terse", Trial: 1}},
		Trial{Key: transcript.Key{Case: "case-0-é", Variant: "terse", Trial: 4}})
	want := marshal(t, Build(in))
	for i := range 20 {
		shuffled := in
		shuffled.Trials = append([]Trial(nil), in.Trials...)
		rng.Shuffle(len(shuffled.Trials), func(a, b int) { shuffled.Trials[a], shuffled.Trials[b] = shuffled.Trials[b], shuffled.Trials[a] })
		b := NewBuilder(shuffled)
		for _, tr := range shuffled.Trials {
			b.Add(tr)
		}
		if diff := cmp.Diff(want, marshal(t, b.Report())); diff != "" {
			t.Fatalf("order %d: the report differs from Build's (-want +got):\n%s", i, diff)
		}
	}
	r := Build(in)
	if r.Ignored != 3 || r.IncompleteCases != 1 || r.CompleteCases != 8 {
		t.Errorf("Build = ignored %d, cases %d complete %d incomplete; want 3, 8, 1", r.Ignored, r.CompleteCases, r.IncompleteCases)
	}
}

func marshal(t *testing.T, r Report) string {
	t.Helper()
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
