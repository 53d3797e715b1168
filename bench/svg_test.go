package main

import (
	"encoding/xml"
	"math"
	"strings"
	"testing"
)

// wellFormed fails the test unless svg parses as XML.
func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(svg)))
	for {
		tok, err := d.Token()
		if se, ok := tok.(xml.StartElement); ok {
			seen := map[string]bool{}
			for _, a := range se.Attr {
				if seen[a.Name.Local] {
					t.Fatalf("<%s> repeats attribute %s", se.Name.Local, a.Name.Local)
				}
				seen[a.Name.Local] = true
			}
		}
		if err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
	}
}

func TestChartSVG(t *testing.T) {
	c := Chart{Title: "a <b> & c", XLabel: "x", YLabel: "y", Series: []Series{
		{Name: "line", Points: []Point{{0, 0}, {1, 2}, {2, 3}}},
		{Name: "dots", Points: []Point{{0.5, 1}}, Scatter: true},
		{Name: "ideal", Points: []Point{{0, 0}, {2, 4}}, Dashed: true},
	}}
	svg := c.SVG()
	wellFormed(t, svg)
	for _, want := range []string{"<polyline", "<circle", "stroke-dasharray", "a &lt;b&gt; &amp; c", ">ideal<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestChartSVGEmpty(t *testing.T) {
	wellFormed(t, (&Chart{Title: "empty"}).SVG())
}

func TestBarChartSVG(t *testing.T) {
	c := BarChart{Title: "429", YLabel: "%", Categories: []string{"pacegate", "x/time/rate"},
		Series: []BarSeries{{Name: "429 %", Values: []float64{0.1, 20}}, {Name: "nan", Values: []float64{math.NaN(), 1}}}}
	svg := c.SVG()
	wellFormed(t, svg)
	if n := strings.Count(string(svg), "<rect"); n != 2+3+2 { // background, frame, 3 bars, 2 legend swatches
		t.Errorf("%d rects", n)
	}
}

func TestNiceAxis(t *testing.T) {
	a, step := niceAxis(0.3, 9.2)
	if a.lo != 0 || a.hi != 10 || step != 2 {
		t.Errorf("niceAxis(0.3, 9.2) = %v, %v", a, step)
	}
	a, _ = niceAxis(math.Inf(1), math.Inf(-1))
	if a.lo != 0 || a.hi <= a.lo {
		t.Errorf("empty extent: %v", a)
	}
}
