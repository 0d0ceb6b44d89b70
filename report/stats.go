package report

import (
	"math"
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
	p := float64(k) / float64(n)
	nf := float64(n)
	z2 := z95 * z95
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	half := z95 / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return Interval{Low: clamp01(center - half), High: clamp01(center + half)}
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

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

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}
