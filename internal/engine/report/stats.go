package report

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"sync"
)

// z95 is the two-sided 95% quantile of the standard normal distribution.
const z95 = 1.959964

// Bootstrap settings. The seed is fixed so that a report is a function of
// its input: rendering the same run twice gives the same intervals.
const (
	bootstrapResamples = 2000
	bootstrapSeed1     = 0x6d73742d7265706f // "mst-repo"
	bootstrapSeed2     = 0x72742d626f6f7421 // "rt-boot!"
)

// wilson returns the 95% Wilson score interval of k successes in n trials
// (n > 0).
func wilson(k, n int) Interval {
	return wilsonN(float64(k)/float64(n), float64(n))
}

// wilsonN returns the 95% Wilson score interval of a proportion p observed
// on n trials, where n need not be whole (an effective number of trials,
// n > 0).
func wilsonN(p, nf float64) Interval {
	z2 := z95 * z95
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	half := z95 / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return Interval{Low: clamp01(center - half), High: clamp01(center + half)}
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

// wilsonCC returns the 95% Wilson score interval with continuity
// correction of a proportion p observed on n trials (n > 0, not
// necessarily whole): every π with |p − π| − 1/(2n) ≤ z·√(π(1−π)/n). Its
// low end is Wilson's low end at p − 1/(2n), or 0 when that is not above
// 0; its high end is Wilson's high end at p + 1/(2n), or 1 when that is
// not below 1.
func wilsonCC(p, n float64) Interval {
	iv := Interval{Low: 0, High: 1}
	half := 1 / (2 * n)
	if p-half > 0 {
		iv.Low = wilsonN(p-half, n).Low
	}
	if p+half < 1 {
		iv.High = wilsonN(p+half, n).High
	}
	return iv
}

// The rules that make a variant's pass-rate interval, as VariantStats's
// IntervalRule names them.
const (
	// IntervalClustered is the interval on the graded trials divided by
	// the measured design effect, adjusted for the cases − 1 degrees of
	// freedom the design effect is measured with.
	IntervalClustered = "clustered"
	// IntervalCases is the interval on the number of cases, each counted
	// as one trial: how alike the trials of a case are could not be
	// measured, because every trial passed, every one failed, or there is
	// a single case.
	IntervalCases = "cases"
)

// clustered is the per-variant interval and what it rests on.
type clustered struct {
	interval Interval
	// designEffect is nil under IntervalCases, where it cannot be
	// measured.
	designEffect *float64
	effective    float64
	rule         string
}

// clusterWilson returns the 95% interval of the pass rate p = ΣPassed/ΣGraded
// of cells, the cases of one variant, each with graded > 0 (at least one
// cell): a continuity-corrected Wilson interval (wilsonCC) on an effective
// number of trials. docs/statistics.md gives the rule in full.
//
// With G cases, N graded trials and C passes, when 0 < C < N and G ≥ 2
// (IntervalClustered) the design effect is the ratio of two CR1
// (cluster-robust sandwich) variances of p: with the cases as clusters,
// and with every trial its own cluster, as if trials were independent.
// With case i having n_i graded trials of which c_i passed:
//
//	V_case  = G/(G−1) · Σ (c_i − p·n_i)² / N²
//	V_trial = N/(N−1) · Σ over trials (x − p)² / N² = N/(N−1) · p(1−p)/N
//	deff    = V_case / V_trial = G(N−1)·S / ((G−1)·N²·C·(N−C)),
//	          S = Σ (N·c_i − C·n_i)²
//
// It is computed exactly in integers and taken as 1 when it is below 1.
// The effective number of trials is then N/deff · (t_{N−1}/t_{G−1})², t_d
// the 0.975 quantile of Student's t with d degrees of freedom: the
// Korn–Graubard allowance for a variance measured on G cases only. One
// trial per case gives S = N·C·(N−C) and G = N, so deff and the factor are
// exactly 1.
//
// When every trial passed, every one failed or there is a single case
// (IntervalCases), S and both variances are 0 or undefined: nothing says
// how alike the trials of a case are. The interval then counts each case
// as one trial (effective trials G), which holds even if every case passes
// or fails as a whole.
func clusterWilson(cells []cell) clustered {
	var bigC, bigN int64
	for _, c := range cells {
		bigC += int64(c.passed)
		bigN += int64(c.graded)
	}
	g := int64(len(cells))
	p := float64(bigC) / float64(bigN)
	if g < 2 || bigC == 0 || bigC == bigN {
		neff := float64(g)
		return clustered{interval: wilsonCC(p, neff), effective: neff, rule: IntervalCases}
	}
	deff := 1.0
	s := new(big.Int)
	var r, sq big.Int
	for _, c := range cells {
		r.SetInt64(bigN*int64(c.passed) - bigC*int64(c.graded))
		s.Add(s, sq.Mul(&r, &r))
	}
	num := new(big.Int).Mul(s, big.NewInt(g*(bigN-1)))
	den := big.NewInt(g - 1)
	den.Mul(den, big.NewInt(bigN))
	den.Mul(den, big.NewInt(bigN))
	den.Mul(den, big.NewInt(bigC))
	den.Mul(den, big.NewInt(bigN-bigC))
	if num.Cmp(den) > 0 {
		deff, _ = new(big.Rat).SetFrac(num, den).Float64()
	}
	df := studentT975(bigN-1) / studentT975(g-1)
	neff := float64(bigN) / deff * df * df
	return clustered{interval: wilsonCC(p, neff), designEffect: &deff, effective: neff, rule: IntervalClustered}
}

// tQuantiles caches studentT975 by degrees of freedom (one entry per
// count of graded trials or cases ever asked about): a report asks for the
// same few again and again, and the coverage test for thousands of runs of
// one size, each a bisection of some 50 incomplete beta functions.
var tQuantiles sync.Map // int64 → float64

// studentT975 returns the 0.975 quantile of Student's t distribution
// with df ≥ 1 degrees of freedom, the t with P(|T| > t) = 0.05, to about
// 1e-13 (judges.go's tQuantile975 reads a 3-decimal table). Up to 10³ it
// bisects P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2) to the last bit, so it
// is a function of df alone.
func studentT975(df int64) float64 {
	if v, ok := tQuantiles.Load(df); ok {
		return v.(float64)
	}
	nu := float64(df)
	if df > 1000 {
		// Past 10³ the incomplete beta's log-gamma terms lose digits
		// (1e-12 at 10⁴, all of them by 10¹²), while the Cornish–Fisher
		// series in 1/df (Abramowitz and Stegun 26.7.5) is good to 1e-13
		// at 10³ and better beyond.
		const z = 1.959963984540054 // the 0.975 normal quantile
		z3, z5, z7, z9 := z*z*z, math.Pow(z, 5), math.Pow(z, 7), math.Pow(z, 9)
		g1 := (z3 + z) / 4
		g2 := (5*z5 + 16*z3 + 3*z) / 96
		g3 := (3*z7 + 19*z5 + 17*z3 - 15*z) / 384
		g4 := (79*z9 + 776*z7 + 1482*z5 - 1920*z3 - 945*z) / 92160
		t := z + (g1+(g2+(g3+g4/nu)/nu)/nu)/nu
		tQuantiles.Store(df, t)
		return t
	}
	// t_1 = 12.706…; t_∞ = 1.95996…
	lo, hi := 1.9, 13.0
	for {
		mid := lo + (hi-lo)/2
		if mid == lo || mid == hi {
			break
		}
		if regIncBeta(nu/2, 0.5, nu/(nu+mid*mid)) > 0.05 {
			lo = mid
		} else {
			hi = mid
		}
	}
	tQuantiles.Store(df, lo)
	return lo
}

// regIncBeta returns the regularized incomplete beta function I_x(a, b)
// (a, b > 0, 0 ≤ x ≤ 1), from its continued fraction (modified Lentz), on
// the side of (a+1)/(a+b+2) where the fraction converges fast.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(a, b, x) / a
	}
	return 1 - front*betaFraction(b, a, 1-x)/b
}

// betaFraction evaluates the continued fraction of I_x(a, b) (Numerical
// Recipes' betacf) to full precision.
func betaFraction(a, b, x float64) float64 {
	const tiny = 1e-300
	guard := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	c, d := 1.0, 1/guard(1-(a+b)*x/(a+1))
	h := d
	for m := 1.0; m < 100000; m++ {
		m2 := 2 * m
		aa := m * (b - m) * x / ((a - 1 + m2) * (a + m2))
		d = 1 / guard(1+aa*d)
		c = guard(1 + aa/c)
		h *= d * c
		aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2))
		d = 1 / guard(1+aa*d)
		c = guard(1 + aa/c)
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return h
}

// passAtK is the unbiased estimate of pass@k for one case with n graded
// trials of which c passed (1 <= k <= n): one minus the chance that k
// trials drawn without replacement all failed, 1 − C(n−c, k)/C(n, k).
func passAtK(n, c, k int) float64 {
	// C(n−c, k)/C(n, k) = Π_{i<k} (n−c−i)/(n−i), 0 once n−c−i reaches 0.
	q := 1.0
	for i := range k {
		if n-c-i <= 0 {
			return 1
		}
		q *= float64(n-c-i) / float64(n-i)
	}
	return 1 - q
}

// passHatK is the unbiased estimate of pass^k for one case with n graded
// trials of which c passed (1 <= k <= n): the chance that k trials drawn
// without replacement all passed, C(c, k)/C(n, k).
func passHatK(n, c, k int) float64 {
	q := 1.0
	for i := range k {
		if c-i <= 0 {
			return 0
		}
		q *= float64(c-i) / float64(n-i)
	}
	return q
}

// bootstrap returns the 95% percentile bootstrap interval of the mean of xs
// (len(xs) > 0), from bootstrapResamples resamples drawn with a fixed seed.
func bootstrap(xs []float64) Interval {
	rng := rand.New(rand.NewPCG(bootstrapSeed1, bootstrapSeed2))
	means := make([]float64, bootstrapResamples)
	n := len(xs)
	for i := range means {
		sum := 0.0
		for range n {
			sum += xs[rng.IntN(n)]
		}
		means[i] = sum / float64(n)
	}
	slices.Sort(means)
	return Interval{Low: percentile(means, 0.025), High: percentile(means, 0.975)}
}

// signTest returns the exact two-sided sign test p-value for b cases going
// one way and a the other (ties left out): twice the probability of a split
// at least as uneven under a fair coin, at most 1. With no untied case it
// is 1.
func signTest(b, a int) float64 {
	n := b + a
	if n == 0 {
		return 1
	}
	k := min(a, b)
	// Sum the binomial(n, ½) probabilities of 0..k in log space, so large n
	// neither overflows nor loses the small terms.
	lnHalfN := float64(n) * math.Log(0.5)
	sum := 0.0
	for i := 0; i <= k; i++ {
		sum += math.Exp(lnChoose(n, i) + lnHalfN)
	}
	return min(1, 2*sum)
}

// lnChoose is the natural log of the binomial coefficient C(n, k).
func lnChoose(n, k int) float64 {
	ln := func(x int) float64 {
		v, _ := math.Lgamma(float64(x) + 1)
		return v
	}
	return ln(n) - ln(k) - ln(n-k)
}

// mean returns the arithmetic mean of xs (len(xs) > 0).
func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// percentile returns the p-quantile (0..1) of sorted values, interpolating
// linearly between closest ranks (len(sorted) > 0).
func percentile(sorted []float64, p float64) float64 {
	h := p * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}
