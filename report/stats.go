package report

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
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

// clustered is the per-variant interval and what it rests on.
type clustered struct {
	interval     Interval
	designEffect float64
	effective    float64
}

// clusterWilson returns the 95% interval of the pass rate ΣPassed/ΣGraded
// of cells, the cases of one variant, each with graded > 0 (at least one
// cell): a Wilson interval on an effective number of trials, the graded
// trials divided by a design effect.
//
// The design effect is the ratio of two CR1 (cluster-robust sandwich)
// variances of the pass rate: with the cases as clusters, and with every
// trial its own cluster, as if trials were independent. With p = C/N,
// G cases and case i having n_i graded trials of which c_i passed:
//
//	V_case  = G/(G−1) · Σ (c_i − p·n_i)² / N²
//	V_trial = N/(N−1) · Σ over trials (x − p)² / N² = N/(N−1) · p(1−p)/N
//	deff    = V_case / V_trial = G(N−1)·S / ((G−1)·N²·C·(N−C)),
//	          S = Σ (N·c_i − C·n_i)²
//
// It is computed exactly in integers, so one trial per case (then S =
// N·C·(N−C) and G = N) gives exactly 1 and the plain Wilson interval.
// It is taken as 1 when it cannot be estimated (a single case, or every
// trial passed or every one failed) and when it is below 1.
func clusterWilson(cells []cell) clustered {
	var bigC, bigN int64
	for _, c := range cells {
		bigC += int64(c.passed)
		bigN += int64(c.graded)
	}
	g := int64(len(cells))
	p := float64(bigC) / float64(bigN)
	deff := 1.0
	if g >= 2 && bigC > 0 && bigC < bigN {
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
	}
	neff := float64(bigN) / deff
	return clustered{interval: wilsonN(p, neff), designEffect: deff, effective: neff}
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
