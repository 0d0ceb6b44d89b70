package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

// wholeCases makes g cases of k graded trials, the first pass of them
// passing every trial and the others failing every one.
func wholeCases(g, k, pass int) []refCase {
	cases := make([]refCase, g)
	for i := range cases {
		cases[i] = refCase{Graded: k}
		if i < pass {
			cases[i].Passed = k
		}
	}
	return cases
}

// TestPassRateInterval checks the pass-rate interval at the edges and in
// the middle against testdata/stats_reference.py's figures.
func TestPassRateInterval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		trials    int
		cases     []refCase
		rule      string
		deff      float64 // 0: null
		effective float64
		low, high float64
	}{
		// 10 cases × 3 trials, all passed: before the cases rule this was
		// Wilson on 30 trials, 88.6–100%, which a variant passing 85% of
		// its cases shows one run in five (0.85¹⁰ = 0.197).
		{"all passed", 3, wholeCases(10, 3, 10), IntervalCases, 0, 10, 0.655463, 1},
		{"all failed", 2, wholeCases(4, 2, 0), IntervalCases, 0, 4, 0, 0.604227},
		// One case says next to nothing about other cases.
		{"single case", 5, []refCase{{5, 3}}, IntervalCases, 0, 1, 0.002482, 1},
		// Every case 1 of 2: the trials of a case disagree more than the
		// cases do, an effect below 1, taken as 1; the 5 degrees of
		// freedom still count: 12 · (t_11/t_5)² trials.
		{"design effect below 1", 2, []refCase{{2, 1}, {2, 1}, {2, 1}, {2, 1}, {2, 1}, {2, 1}}, IntervalClustered, 1, 8.797365, 0.186027, 0.813973},
		// The quickstart's terse variant: 5 of 14 cases pass all 3.
		{"middle", 3, wholeCases(14, 3, 5), IntervalClustered, 41.0 / 13, 11.637465, 0.124496, 0.670217},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Build(oneVariant(tt.trials, tt.cases, uint64(i))).Variants[0]
			wantDeff := "null"
			if tt.deff != 0 {
				wantDeff = show(&tt.deff)
			}
			if v.IntervalRule != tt.rule || !near(*v.EffectiveTrials, tt.effective, 5e-6) || show(v.DesignEffect) != wantDeff {
				t.Errorf("rule %s, effective trials %v, design effect %s; want %s, %v, %s",
					v.IntervalRule, *v.EffectiveTrials, show(v.DesignEffect), tt.rule, tt.effective, wantDeff)
			}
			if !near(v.Interval.Low, tt.low, 5e-6) || !near(v.Interval.High, tt.high, 5e-6) {
				t.Errorf("interval %.6f … %.6f, want %.6f … %.6f", v.Interval.Low, v.Interval.High, tt.low, tt.high)
			}
			// The cases rule's interval is the one on the cases, each one
			// trial; it is never tighter than that.
			if tt.rule == IntervalCases {
				onCases := wilsonCC(*v.PassRate, float64(v.Cases))
				if *v.Interval != onCases {
					t.Errorf("interval %v, want %v, the one on %d cases", *v.Interval, onCases, v.Cases)
				}
			}
		})
	}
}

// TestCasesRuleNoTighter: under the cases rule, however many trials each
// case has, the interval is the one on the number of cases, and never
// tighter than under the clustered rule one case away from the edge.
func TestCasesRuleNoTighter(t *testing.T) {
	t.Parallel()
	for g := 1; g <= 30; g++ {
		for k := 1; k <= 6; k++ {
			all := Build(oneVariant(k, wholeCases(g, k, g), uint64(g*10+k))).Variants[0]
			none := Build(oneVariant(k, wholeCases(g, k, 0), uint64(g*10+k))).Variants[0]
			onCases := wilsonCC(1, float64(g))
			if all.IntervalRule != IntervalCases || *all.Interval != onCases || *all.EffectiveTrials != float64(g) || all.DesignEffect != nil {
				t.Errorf("%d cases × %d trials all passed: rule %s, interval %v, effective %v, design effect %s; want cases, %v, %d, null",
					g, k, all.IntervalRule, *all.Interval, *all.EffectiveTrials, show(all.DesignEffect), onCases, g)
			}
			// All failed mirrors all passed.
			if none.IntervalRule != IntervalCases || !near(none.Interval.High, 1-onCases.Low, 1e-12) || none.Interval.Low != 0 {
				t.Errorf("%d cases × %d trials all failed: rule %s, interval %v, want cases, 0 … %v", g, k, none.IntervalRule, *none.Interval, 1-onCases.Low)
			}
			if g >= 2 {
				// One case failing as a whole is the clustered rule, which
				// must not claim more than the cases rule does.
				one := Build(oneVariant(k, wholeCases(g, k, g-1), uint64(g*10+k))).Variants[0]
				if one.IntervalRule != IntervalClustered || *one.EffectiveTrials > float64(g)+1e-9 {
					t.Errorf("%d cases × %d trials, one case failed: rule %s, effective %v, want clustered, at most %d", g, k, one.IntervalRule, *one.EffectiveTrials, g)
				}
			}
		}
	}
}

// TestWilsonCC checks the continuity-corrected Wilson interval against
// Newcombe's worked examples (Statistics in Medicine 1998, method 4), and
// at non-whole n, where it must stay inside [0, 1] and around p.
func TestWilsonCC(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		k, n      int
		low, high float64
	}{
		{81, 263, 0.2535, 0.3682},
		{15, 148, 0.0598, 0.1644},
		{0, 20, 0, 0.2005},
		{1, 29, 0.0018, 0.1963},
	} {
		got := wilsonCC(float64(tt.k)/float64(tt.n), float64(tt.n))
		if !near(got.Low, tt.low, 5e-5) || !near(got.High, tt.high, 5e-5) {
			t.Errorf("wilsonCC(%d/%d) = %.4f–%.4f, want %.4f–%.4f", tt.k, tt.n, got.Low, got.High, tt.low, tt.high)
		}
	}
	for _, n := range []float64{0.05, 0.3, 0.5, 0.9, 1, 1.7, 2.5, 7.3, 40.1} {
		for i := 0; i <= 20; i++ {
			p := float64(i) / 20
			iv := wilsonCC(p, n)
			if math.IsNaN(iv.Low) || math.IsNaN(iv.High) || iv.Low < 0 || iv.High > 1 || iv.Low > p || iv.High < p {
				t.Errorf("wilsonCC(%v, %v) = %v, want an interval around p inside [0, 1]", p, n, iv)
			}
			if w := wilsonN(p, n); iv.Low > w.Low || iv.High < w.High {
				t.Errorf("wilsonCC(%v, %v) = %v, narrower than Wilson's %v", p, n, iv, w)
			}
		}
	}
}

// TestStudentT975 checks the t quantiles against published values (R's
// qt(0.975, df)) to 1000 degrees of freedom, the finite sums of
// testdata/stats_reference.py beyond, and z + (z³ + z)/4df at 2⁴⁰.
func TestStudentT975(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		df   int64
		want float64
	}{
		{1, 12.7062047361747}, {2, 4.30265272974946}, {3, 3.18244630528371}, {9, 2.26215716279820},
		{29, 2.04522964213270}, {100, 1.98397151852355}, {1000, 1.96233908082641},
		{1001, 1.96233670528090}, {5000, 1.96043855170626}, {10000, 1.96020123989011}, {1 << 40, 1.95996398454221},
	} {
		if got := studentT975(tt.df); !near(got, tt.want, 1e-12) {
			t.Errorf("studentT975(%d) = %.15g, want %.15g", tt.df, got, tt.want)
		}
	}
}

// TestTextIntervalRuleMark: the text report marks an interval on the
// number of cases with † and explains it under the table, within the
// width; the Markdown summary does the same.
func TestTextIntervalRuleMark(t *testing.T) {
	t.Parallel()
	in := oneVariant(3, wholeCases(10, 3, 10), 1)
	in.Variants[0].Client, in.Variants[0].Model = "api", "offline"
	r := Build(in)
	for _, width := range []int{0, 80, 40} {
		var buf bytes.Buffer
		if err := r.WriteTextWidth(&buf, width); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if !strings.Contains(out, "100.0% [65.5–100.0]†") || !strings.Contains(out, "(† every trial passed, every one failed,") {
			t.Errorf("WriteTextWidth(%d) lacks the mark or its legend:\n%s", width, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if width > 0 && utf8.RuneCountInString(l) > width && !strings.HasPrefix(l, "Run ") {
				t.Errorf("WriteTextWidth(%d): a line of %d: %q", width, utf8.RuneCountInString(l), l)
			}
		}
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md, Verdict{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 65.5–100.0%† |") || !strings.Contains(md.String(), "\n† Every trial passed, every one failed, or there is one case:") {
		t.Errorf("WriteMarkdown lacks the mark or its legend:\n%s", md.String())
	}

	// A clustered interval has no mark and no legend.
	r = Build(oneVariant(3, wholeCases(10, 3, 7), 1))
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	md.Reset()
	if err := r.WriteMarkdown(&md, Verdict{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "†") || strings.Contains(md.String(), "†") {
		t.Errorf("a clustered interval is marked:\n%s\n%s", buf.String(), md.String())
	}
}
