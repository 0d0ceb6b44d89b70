package report

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestWilson(t *testing.T) {
	t.Parallel()
	tests := []struct {
		k, n      int
		low, high float64
	}{
		{8, 10, 0.4902, 0.9433},
		{0, 10, 0, 0.2775},
		{10, 10, 0.7225, 1},
		{14, 20, 0.4810, 0.8545},
		{50, 100, 0.4038, 0.5962},
		{1, 1, 0.2065, 1},
		{0, 1, 0, 0.7935},
	}
	for _, tt := range tests {
		got := wilson(tt.k, tt.n)
		if !near(got.Low, tt.low, 5e-5) || !near(got.High, tt.high, 5e-5) {
			t.Errorf("wilson(%d, %d) = %.4f–%.4f, want %.4f–%.4f", tt.k, tt.n, got.Low, got.High, tt.low, tt.high)
		}
		if got.Low < 0 || got.High > 1 {
			t.Errorf("wilson(%d, %d) = %v, outside [0, 1]", tt.k, tt.n, got)
		}
	}
}

func TestSignTest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		b, a int
		want float64
	}{
		{6, 0, 0.03125},
		{0, 6, 0.03125},
		{9, 1, 0.021484375},
		{10, 0, 0.001953125},
		{3, 7, 0.34375},
		{5, 5, 1},
		{1, 0, 1},
		{0, 0, 1},
		{60, 40, 0.05688793364098079},
		{600, 400, 2.7284641560660184e-10},
		{5000, 5000, 1},
	}
	for _, tt := range tests {
		got := signTest(tt.b, tt.a)
		if !near(got, tt.want, 1e-9*math.Max(tt.want, 1e-3)) {
			t.Errorf("signTest(%d, %d) = %g, want %g", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	xs := []float64{10, 20, 30, 40, 50}
	tests := []struct {
		p, want float64
	}{
		{0, 10}, {0.5, 30}, {0.95, 48}, {1, 50}, {0.25, 20}, {0.1, 14},
	}
	for _, tt := range tests {
		if got := percentile(xs, tt.p); !near(got, tt.want, 1e-9) {
			t.Errorf("percentile(%v, %v) = %v, want %v", xs, tt.p, got, tt.want)
		}
	}
	if got := percentile([]float64{7}, 0.95); got != 7 {
		t.Errorf("percentile([7], 0.95) = %v, want 7", got)
	}
}

func TestBootstrap(t *testing.T) {
	t.Parallel()
	diffs := []float64{1, 1, 0, 0.5, 1, 0, 1, 1, 0, 1}
	first := bootstrap(diffs)
	for range 3 {
		if got := bootstrap(diffs); got != first {
			t.Fatalf("bootstrap(%v) = %v, then %v: not deterministic", diffs, first, got)
		}
	}
	m := mean(diffs)
	if first.Low > m || first.High < m || first.Low < 0 || first.High > 1 {
		t.Errorf("bootstrap(%v) = %v, want an interval around the mean %v inside [0, 1]", diffs, first, m)
	}
	// A 95% interval of the mean of 10 such values is roughly ±0.25 wide.
	if w := first.High - first.Low; w < 0.3 || w > 0.7 {
		t.Errorf("bootstrap(%v) = %v, width %v, want about 0.5", diffs, first, w)
	}
	for _, same := range [][]float64{{0.5}, {0, 0, 0}, {-1, -1}} {
		want := Interval{Low: same[0], High: same[0]}
		if got := bootstrap(same); got != want {
			t.Errorf("bootstrap(%v) = %v, want %v", same, got, want)
		}
	}
}
