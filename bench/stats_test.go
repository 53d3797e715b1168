package main

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ q, want float64 }{
		{0, 1}, {0.5, 3}, {1, 5}, {0.25, 2}, {0.9, 4.6},
	} {
		if got := Quantile(xs, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if xs[0] != 5 {
		t.Error("Quantile sorted its input")
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("empty set: want NaN")
	}
}

func TestSummarize(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	s := Summarize(xs)
	if s.N != 100 || s.Min != 1 || s.Max != 100 || s.Mean != 50.5 {
		t.Errorf("Summarize = %+v", s)
	}
	if math.Abs(s.P99-99.01) > 1e-9 || math.Abs(s.P50-50.5) > 1e-9 {
		t.Errorf("p50 %v p99 %v", s.P50, s.P99)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("empty set: want zero Summary")
	}
}

func TestSlope(t *testing.T) {
	xs := []float64{0, 1, 2, 3}
	ys := []float64{1, 3, 5, 7}
	if got := slope(xs, ys); math.Abs(got-2) > 1e-12 {
		t.Errorf("slope = %v, want 2", got)
	}
	if !math.IsNaN(slope([]float64{1}, []float64{1})) {
		t.Error("one point: want NaN")
	}
}

// Two groups on parallel lines, y = 1 + 2x and y = 4 + 2x, sampled at
// different x: one slope, 2, and each group's intercept.
func TestCommonSlope(t *testing.T) {
	xs := [][]float64{{0, 1, 2}, {5, 7}}
	ys := [][]float64{{1, 3, 5}, {14, 18}}
	s, a := commonSlope(xs, ys)
	if math.Abs(s-2) > 1e-12 || len(a) != 2 || math.Abs(a[0]-1) > 1e-12 || math.Abs(a[1]-4) > 1e-12 {
		t.Errorf("commonSlope = %v, %v; want 2, [1 4]", s, a)
	}
	if s, _ := commonSlope([][]float64{{3, 3}}, [][]float64{{1, 2}}); !math.IsNaN(s) {
		t.Errorf("no spread of x: slope %v, want NaN", s)
	}
}

func TestCDF(t *testing.T) {
	xs := []float64{3, 1, 2, 4}
	pts := cdf(xs, 10)
	if len(pts) != 4 || pts[0].X != 1 || pts[3].Y != 1 || pts[1].Y != 0.5 {
		t.Errorf("cdf = %v", pts)
	}
	big := make([]float64, 1000)
	for i := range big {
		big[i] = float64(i)
	}
	pts = cdf(big, 100)
	if len(pts) > 101 || pts[len(pts)-1].Y != 1 {
		t.Errorf("downsampled cdf: %d points, last %v", len(pts), pts[len(pts)-1])
	}
}
