package main

import (
	"math"
	"slices"
	"time"
)

// Summary is the distribution of one sample set. Values keep the unit
// of the samples (the callers use milliseconds unless a name says
// otherwise).
type Summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Summarize returns the summary of xs; xs is not modified. An empty set
// gives a zero Summary.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Summary{
		N: len(s), Min: s[0], Max: s[len(s)-1], Mean: mean(s),
		P50: quantile(s, 0.50), P90: quantile(s, 0.90), P99: quantile(s, 0.99),
	}
}

// Quantile returns the q-quantile (0..1) of xs by linear interpolation
// between closest ranks; NaN for an empty set. xs is not modified.
func Quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, q)
}

// quantile is Quantile on an already sorted slice.
func quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case q <= 0:
		return sorted[0]
	case q >= 1:
		return sorted[n-1]
	}
	pos := q * float64(n-1)
	lo := int(pos)
	if lo+1 >= n {
		return sorted[n-1]
	}
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[lo+1]-sorted[lo])
}

// Median is Quantile(xs, 0.5).
func Median(xs []float64) float64 { return Quantile(xs, 0.5) }

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// us converts a duration to float microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ratio returns a/b, or NaN when b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// slope returns the least-squares slope of ys over xs (NaN with fewer
// than two points or no spread in xs): commonSlope of one group.
func slope(xs, ys []float64) float64 {
	if len(xs) < 2 || len(xs) != len(ys) {
		return math.NaN()
	}
	s, _ := commonSlope([][]float64{xs}, [][]float64{ys})
	return s
}

// commonSlope fits y = a[g] + s·x to groups of points (xs[g][i],
// ys[g][i]) by least squares: one slope for every group, an intercept
// each. It returns s and the intercepts; NaN for s with no spread of x
// within the groups.
func commonSlope(xs, ys [][]float64) (s float64, a []float64) {
	var sxy, sxx float64
	mx, my := make([]float64, len(xs)), make([]float64, len(xs))
	for g := range xs {
		mx[g], my[g] = mean(xs[g]), mean(ys[g])
		for i := range xs[g] {
			dx := xs[g][i] - mx[g]
			sxy += dx * (ys[g][i] - my[g])
			sxx += dx * dx
		}
	}
	if sxx == 0 {
		return math.NaN(), nil
	}
	s = sxy / sxx
	a = make([]float64, len(xs))
	for g := range xs {
		a[g] = my[g] - s*mx[g]
	}
	return s, a
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// cdf returns up to maxPoints (x, fraction ≤ x) points of xs' empirical
// distribution, sorted by x.
func cdf(xs []float64, maxPoints int) []Point {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	step := max(1, len(s)/maxPoints)
	pts := make([]Point, 0, len(s)/step+1)
	for i := 0; i < len(s); i += step {
		pts = append(pts, Point{s[i], float64(i+1) / float64(len(s))})
	}
	if last := len(s) - 1; last%step != 0 {
		pts = append(pts, Point{s[last], 1})
	}
	return pts
}
