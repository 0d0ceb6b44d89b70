package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// minCoverage is the least share of simulated runs whose pass-rate
// interval must hold the true rate, in every scenario of the grid.
const minCoverage = 0.93

// Correlations of the trials of one case in the coverage grid.
const (
	// independent: every case has the true rate; trials are independent.
	independent = iota
	// moderate: each case's rate is drawn from Beta(2μ, 2(1−μ)), mean μ,
	// so the trials of a case are alike (intra-case correlation 1/3).
	moderate
	// whole: each case passes every trial (with chance μ) or fails every
	// one: intra-case correlation 1.
	whole
)

var correlationNames = [...]string{"independent", "moderate", "whole"}

// coverageScenario is one cell of the grid: cases × trials per case, the
// true rate (the mean rate of the population of cases) and how alike the
// trials of a case are.
type coverageScenario struct {
	cases, trials int
	rate          float64
	correlation   int
}

// coverageResult is what simulating a scenario found.
type coverageResult struct {
	coverage  float64 // share of runs whose interval holds the true rate
	width     float64 // mean width of the interval
	casesRule float64 // share of runs whose interval is IntervalCases
}

// simulateCoverage draws reps runs of s from a generator seeded by s
// alone, computes each run's interval as Build does (variantStats), and
// measures how often it holds s.rate.
func simulateCoverage(s coverageScenario, reps int) coverageResult {
	seed := uint64(s.cases)<<32 | uint64(s.trials)<<24 | uint64(math.Round(s.rate*1000))<<8 | uint64(s.correlation)
	rng := rand.New(rand.NewPCG(seed, 0x6d73742d636f7665)) // "mst-cove"
	cells := make([][]cell, s.cases)
	complete := make([]bool, s.cases)
	for i := range cells {
		cells[i] = make([]cell, 1)
		complete[i] = true
	}
	var res coverageResult
	for range reps {
		for i := range cells {
			q := s.rate
			switch s.correlation {
			case independent:
			case moderate:
				q = betaSample(rng, 2*s.rate, 2*(1-s.rate))
			case whole:
				q = 0
				if rng.Float64() < s.rate {
					q = 1
				}
			}
			passed := 0
			for range s.trials {
				if rng.Float64() < q {
					passed++
				}
			}
			cells[i][0] = cell{present: s.trials, graded: s.trials, passed: passed}
		}
		v := variantStats(VariantInfo{Name: "v"}, variantAcc{}, cells, complete, 0, s.cases*s.trials, s.trials)
		if v.Interval.Low <= s.rate && s.rate <= v.Interval.High {
			res.coverage++
		}
		res.width += v.Interval.High - v.Interval.Low
		if v.IntervalRule == IntervalCases {
			res.casesRule++
		}
	}
	res.coverage /= float64(reps)
	res.width /= float64(reps)
	res.casesRule /= float64(reps)
	return res
}

// betaSample draws from Beta(a, b) as X/(X+Y), X ~ Gamma(a), Y ~ Gamma(b).
func betaSample(rng *rand.Rand, a, b float64) float64 {
	x, y := gammaSample(rng, a), gammaSample(rng, b)
	if x+y == 0 {
		// Both underflowed (a and b tiny): the draw is at an end.
		if rng.Float64() < a/(a+b) {
			return 1
		}
		return 0
	}
	return x / (x + y)
}

// gammaSample draws from Gamma(a, 1) (a > 0) by Marsaglia and Tsang's
// method, boosting a below 1 by U^(1/a).
func gammaSample(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		return gammaSample(rng, a+1) * math.Pow(rng.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// TestIntervalCoverage simulates runs over a grid of scenarios and checks
// that the pass-rate interval holds the true rate in at least 93% of them
// in every scenario, at the edges too (every case passing or failing as a
// whole, rates near 100%). With -v it prints the grid that
// docs/statistics.md shows:
//
//	go test ./report -run TestIntervalCoverage -v
func TestIntervalCoverage(t *testing.T) {
	t.Parallel()
	reps := 2000
	if testing.Short() {
		reps = 500
	}
	var grid []coverageScenario
	for _, g := range []int{10, 20, 30} {
		for _, k := range []int{1, 3, 5} {
			for _, rate := range []float64{0.5, 0.7, 0.85, 0.9, 0.95, 0.99} {
				for corr := range correlationNames {
					grid = append(grid, coverageScenario{cases: g, trials: k, rate: rate, correlation: corr})
				}
			}
		}
	}
	results := make([]coverageResult, len(grid))
	t.Run("grid", func(t *testing.T) {
		for _, g := range []int{10, 20, 30} {
			t.Run(fmt.Sprintf("%d cases", g), func(t *testing.T) {
				t.Parallel()
				for i, s := range grid {
					if s.cases == g {
						results[i] = simulateCoverage(s, reps)
					}
				}
			})
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "coverage of the 95%% interval (mean width), %d runs a scenario\n", reps)
	fmt.Fprintf(&b, "| cases | trials | rate | independent | moderate | whole cases |\n|---:|---:|---:|---:|---:|---:|\n")
	worst := 0
	for i := 0; i < len(grid); i += len(correlationNames) {
		s := grid[i]
		fmt.Fprintf(&b, "| %d | %d | %.2f |", s.cases, s.trials, s.rate)
		for j := range correlationNames {
			r := results[i+j]
			fmt.Fprintf(&b, " %.1f%% (%.2f) |", r.coverage*100, r.width)
			if r.coverage < results[worst].coverage {
				worst = i + j
			}
		}
		b.WriteString("\n")
	}
	w := grid[worst]
	fmt.Fprintf(&b, "lowest: %.1f%% (%d cases, %d trials, rate %.2f, %s)", results[worst].coverage*100, w.cases, w.trials, w.rate, correlationNames[w.correlation])
	t.Log("\n" + b.String())
	for i, s := range grid {
		if r := results[i]; r.coverage < minCoverage {
			t.Errorf("%d cases × %d trials, rate %.2f, %s: the interval holds the rate in %.1f%% of %d runs, want at least %.0f%%",
				s.cases, s.trials, s.rate, correlationNames[s.correlation], r.coverage*100, reps, minCoverage*100)
		}
	}
	// The edge rule applies where it should: every case passing or failing
	// as a whole at a rate near 100% often passes every trial.
	for i, s := range grid {
		if s.cases == 10 && s.trials == 3 && s.rate == 0.95 && s.correlation == whole && results[i].casesRule < 0.5 {
			t.Errorf("10 cases × 3 trials, rate 0.95, whole cases: the cases rule made %.1f%% of the intervals, want about 60%% (every case passed)", results[i].casesRule*100)
		}
	}
}
