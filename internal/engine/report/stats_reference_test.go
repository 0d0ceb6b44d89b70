package report

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/mst-eval/mst/transcript"
)

// refCase is one case of a reference table: graded trials and passes.
type refCase struct {
	Graded int `json:"graded"`
	Passed int `json:"passed"`
}

// oneVariant makes the input of a run of one variant over cases, each with
// trialsPerCase trials: the passes, then the graded failures, then errored
// trials for the rest, so every case is complete. The trials are given in
// a shuffled order: Build must not depend on it.
func oneVariant(trialsPerCase int, cases []refCase, seed uint64) Input {
	in := Input{Run: transcript.Run{Trials: trialsPerCase}, Variants: []VariantInfo{{Name: "v"}}}
	for i, c := range cases {
		id := fmt.Sprintf("c%02d", i)
		in.Cases = append(in.Cases, id)
		for n := 1; n <= trialsPerCase; n++ {
			switch {
			case n <= c.Passed:
				in.Trials = append(in.Trials, tr(id, "v", n, transcript.Answered, true))
			case n <= c.Graded:
				in.Trials = append(in.Trials, tr(id, "v", n, transcript.Answered, false))
			default:
				in.Trials = append(in.Trials, tr(id, "v", n, transcript.Errored, false))
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	rng.Shuffle(len(in.Trials), func(i, j int) { in.Trials[i], in.Trials[j] = in.Trials[j], in.Trials[i] })
	return in
}

// TestStatsReference compares Build's per-variant numbers with those of
// testdata/stats_reference.py, an implementation of docs/statistics.md in
// Python written apart from this package (its output is checked in, so the
// test needs no Python).
func TestStatsReference(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "stats_reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tables []struct {
		Name          string    `json:"name"`
		TrialsPerCase int       `json:"trialsPerCase"`
		Cases         []refCase `json:"cases"`
		Want          struct {
			Passed, Graded, Cases                int
			PassRate, EffectiveTrials, Low, High float64
			DesignEffect                         *float64
			IntervalRule                         string
			PassK                                []struct {
				K, Cases        int
				PassAt, PassHat *float64
			}
		} `json:"want"`
	}
	if err := json.Unmarshal(b, &tables); err != nil {
		t.Fatalf("testdata/stats_reference.json: %v", err)
	}
	if len(tables) < 10 {
		t.Fatalf("testdata/stats_reference.json has %d tables, want at least 10", len(tables))
	}
	const tol = 1e-9
	for i, tb := range tables {
		t.Run(tb.Name, func(t *testing.T) {
			r := Build(oneVariant(tb.TrialsPerCase, tb.Cases, uint64(i)))
			v, w := r.Variants[0], tb.Want
			if v.Passed != w.Passed || v.Graded != w.Graded || v.Cases != w.Cases {
				t.Errorf("passed/graded/cases = %d/%d/%d, want %d/%d/%d", v.Passed, v.Graded, v.Cases, w.Passed, w.Graded, w.Cases)
			}
			if v.PassRate == nil || v.Interval == nil || v.EffectiveTrials == nil {
				t.Fatalf("variant %+v has nulls, want numbers", v)
			}
			if v.IntervalRule != w.IntervalRule {
				t.Errorf("interval rule %q, reference %q", v.IntervalRule, w.IntervalRule)
			}
			if !nearPtr(v.DesignEffect, w.DesignEffect, tol) {
				t.Errorf("design effect %s, reference %s", show(v.DesignEffect), show(w.DesignEffect))
			}
			for _, f := range []struct {
				what      string
				got, want float64
			}{
				{"pass rate", *v.PassRate, w.PassRate},
				{"effective trials", *v.EffectiveTrials, w.EffectiveTrials},
				{"interval low", v.Interval.Low, w.Low},
				{"interval high", v.Interval.High, w.High},
			} {
				if !near(f.got, f.want, tol) {
					t.Errorf("%s = %.12g, reference %.12g", f.what, f.got, f.want)
				}
			}
			if len(v.PassK) != len(w.PassK) {
				t.Fatalf("passK has %d entries, reference %d", len(v.PassK), len(w.PassK))
			}
			for j, p := range v.PassK {
				q := w.PassK[j]
				if p.K != q.K || p.Cases != q.Cases || !nearPtr(p.PassAt, q.PassAt, tol) || !nearPtr(p.PassHat, q.PassHat, tol) {
					t.Errorf("passK[%d] = k %d, %d cases, pass@k %v, pass^k %v; reference k %d, %d cases, %v, %v",
						j, p.K, p.Cases, show(p.PassAt), show(p.PassHat), q.K, q.Cases, show(q.PassAt), show(q.PassHat))
				}
			}
		})
	}
}

func nearPtr(a, b *float64, tol float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return near(*a, *b, tol)
}

func show(x *float64) string {
	if x == nil {
		return "null"
	}
	return fmt.Sprint(*x)
}

// TestStatsByHand checks one table worked by hand: three cases of two
// trials, A 2/2, B 0/2, C 1/2.
//
//	N = 6 graded, C = 3 passed, G = 3 cases, p = 1/2.
//	Case residuals c_i − p·n_i: +1, −1, 0, so Σ = 2 and
//	  V_case = G/(G−1) · 2/N² = 3/2 · 2/36 = 1/12.
//	Trial residuals ±1/2, six of them, Σ squares = 3/2, so
//	  V_trial = N/(N−1) · (3/2)/N² = 6/5 · 1/24 = 1/20.
//	Design effect 20/12 = 5/3; 6 ÷ 5/3 = 3.6 trials.
//	Degrees of freedom: G − 1 = 2 instead of N − 1 = 5, so the effective
//	  trials are 3.6 · (t_5/t_2)² = 3.6 · (2.570582/4.302653)² = 1.284969.
//	Continuity correction 1/(2n) = 0.389114: Wilson's low end at
//	  p' = 0.110886, n = 1.284969 (z = 1.959964, z² = 3.841459):
//	  centre (p' + z²/2n)/(1 + z²/n) = 1.605644/3.989530 = 0.402465;
//	  half = z/(1 + z²/n) · √(p'(1−p')/n + z²/4n²)
//	       = 0.491279 · √(0.076728 + 0.581636) = 0.398617,
//	  so the low end is 0.385%, and by symmetry the high end 99.615%:
//	  three cases say next to nothing (plain Wilson on 6 trials: 18.8% … 81.2%).
//	pass@1 = pass^1 = mean of 1, 0, 1/2 = 1/2.
//	pass@2: A 1, B 0, C 1 − C(1,2)/C(2,2) = 1; mean 2/3.
//	pass^2: A 1, B 0, C C(1,2)/C(2,2) = 0; mean 1/3.
func TestStatsByHand(t *testing.T) {
	t.Parallel()
	v := Build(oneVariant(2, []refCase{{2, 2}, {2, 0}, {2, 1}}, 7)).Variants[0]
	if v.IntervalRule != IntervalClustered || !near(*v.DesignEffect, 5.0/3, 1e-12) || !near(*v.EffectiveTrials, 1.284969, 5e-7) {
		t.Errorf("rule %s, design effect %v, effective trials %v, want clustered, 5/3 and 1.284969", v.IntervalRule, *v.DesignEffect, *v.EffectiveTrials)
	}
	if !near(v.Interval.Low, 0.00385, 5e-6) || !near(v.Interval.High, 0.99615, 5e-6) {
		t.Errorf("interval = %.5f … %.5f, want 0.00385 … 0.99615", v.Interval.Low, v.Interval.High)
	}
	want := []struct{ at, hat float64 }{{0.5, 0.5}, {2.0 / 3, 1.0 / 3}}
	for j, w := range want {
		if p := v.PassK[j]; p.Cases != 3 || !near(*p.PassAt, w.at, 1e-12) || !near(*p.PassHat, w.hat, 1e-12) {
			t.Errorf("pass@%d, pass^%d = %v, %v over %d cases, want %v, %v over 3", j+1, j+1, show(p.PassAt), show(p.PassHat), p.Cases, w.at, w.hat)
		}
	}
}

// TestClusterIntervalWidth: when whole cases pass or fail together, as on
// the quickstart, the interval is wider than Wilson's on the trials taken
// as independent, and contains it; with one trial per case it is exactly
// the continuity-corrected Wilson interval on the trials.
func TestClusterIntervalWidth(t *testing.T) {
	t.Parallel()
	for g := 2; g <= 12; g++ {
		for k := 2; k <= 5; k++ {
			for pass := 1; pass < g; pass++ {
				cases := make([]refCase, g)
				for i := range cases {
					cases[i] = refCase{Graded: k}
					if i < pass {
						cases[i].Passed = k
					}
				}
				v := Build(oneVariant(k, cases, uint64(g*k+pass))).Variants[0]
				naive := wilson(v.Passed, v.Graded)
				got := *v.Interval
				if !(got.Low < naive.Low && got.High > naive.High) {
					t.Errorf("%d of %d cases pass all %d trials: interval %v, want wider than the independent-trial Wilson %v on both sides", pass, g, k, got, naive)
				}
			}
		}
	}
	// The quickstart's terse variant: 5 of 14 cases pass all 3 trials.
	cases := make([]refCase, 14)
	for i := range cases {
		cases[i] = refCase{Graded: 3}
		if i < 5 {
			cases[i].Passed = 3
		}
	}
	v := Build(oneVariant(3, cases, 1)).Variants[0]
	naive := wilson(15, 42)
	// √deff = √(41/13) = 1.78 of it is the design effect; the rest the
	// continuity correction and the 13 degrees of freedom.
	if ratio := (v.Interval.High - v.Interval.Low) / (naive.High - naive.Low); ratio < 1.85 || ratio > 2.05 {
		t.Errorf("quickstart terse: interval %v is %.2f× the width of Wilson's %v, want about 1.96×", *v.Interval, ratio, naive)
	}

	for n := 1; n <= 40; n++ {
		for c := 0; c <= n; c++ {
			cases := make([]refCase, n)
			for i := range cases {
				cases[i] = refCase{Graded: 1}
				if i < c {
					cases[i].Passed = 1
				}
			}
			v := Build(oneVariant(1, cases, uint64(n*100+c))).Variants[0]
			// Every case passing or failing, or a single case, is the
			// cases rule, which counts the same n trials.
			rule, deff := IntervalClustered, "1"
			if c == 0 || c == n || n == 1 {
				rule, deff = IntervalCases, "null"
			}
			if want := wilsonCC(float64(c)/float64(n), float64(n)); *v.Interval != want || v.IntervalRule != rule || show(v.DesignEffect) != deff || *v.EffectiveTrials != float64(n) {
				t.Errorf("one trial per case, %d of %d pass: interval %v, rule %s, design effect %s, effective %v; want %v, %s, %s, %d",
					c, n, *v.Interval, v.IntervalRule, show(v.DesignEffect), *v.EffectiveTrials, want, rule, deff, n)
			}
		}
	}
}

// TestPassKEstimators checks the per-case estimators against the binomial
// coefficients for every n up to 12.
func TestPassKEstimators(t *testing.T) {
	t.Parallel()
	choose := func(n, k int) float64 {
		if k < 0 || k > n {
			return 0
		}
		return math.Round(math.Exp(lnChoose(n, k)))
	}
	for n := 1; n <= 12; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				at := 1 - choose(n-c, k)/choose(n, k)
				hat := choose(c, k) / choose(n, k)
				if got := passAtK(n, c, k); !near(got, at, 1e-12) {
					t.Errorf("passAtK(%d, %d, %d) = %v, want %v", n, c, k, got, at)
				}
				if got := passHatK(n, c, k); !near(got, hat, 1e-12) {
					t.Errorf("passHatK(%d, %d, %d) = %v, want %v", n, c, k, got, hat)
				}
			}
		}
	}
}
