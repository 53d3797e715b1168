package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// Point is one (x, y) datum of a chart.
type Point struct{ X, Y float64 }

// Series is one named line or point set of a Chart.
type Series struct {
	Name    string
	Points  []Point
	Scatter bool // draw points instead of a polyline
	Dashed  bool // dashed line (reference lines such as "ideal")
}

// Chart is a line/scatter chart with linear axes. CDFs are line charts
// of [cdf] points.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
}

// BarChart is a grouped bar chart: one group per category, one bar per
// series in each group.
type BarChart struct {
	Title, YLabel string
	Categories    []string
	Series        []BarSeries
}

// BarSeries is one named row of values, one per category.
type BarSeries struct {
	Name   string
	Values []float64
}

const (
	svgW, svgH                 = 760, 430
	padL, padR, padT, padB     = 78, 24, 44, 58
	plotW, plotH               = svgW - padL - padR, svgH - padT - padB
	nTicks                     = 6
	fontFamily                 = `font-family="sans-serif"`
	fontAttr                   = fontFamily + ` font-size="12"`
	svgHeaderFmt               = `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">` + "\n"
	legendRow, legendX, legend = 16, padL + 12, padT + 14
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// axis maps data values to pixels along one dimension.
type axis struct{ lo, hi float64 }

func (a axis) frac(v float64) float64 { return (v - a.lo) / (a.hi - a.lo) }

// niceAxis widens [lo, hi] to round tick boundaries and returns the
// tick step.
func niceAxis(lo, hi float64) (axis, float64) {
	if math.IsNaN(lo) || math.IsInf(lo, 0) || math.IsNaN(hi) || math.IsInf(hi, 0) {
		lo, hi = 0, 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / (nTicks - 1))
	return axis{math.Floor(lo/step) * step, math.Ceil(hi/step) * step}, step
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// fmtTick formats a tick label compactly.
func fmtTick(v float64) string {
	if v != 0 && (math.Abs(v) >= 1e6 || math.Abs(v) < 1e-3) {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// bounds returns the data extent of every series (y includes 0).
func (c *Chart) bounds() (x, y axis) {
	x = axis{math.Inf(1), math.Inf(-1)}
	y = axis{0, math.Inf(-1)}
	for _, s := range c.Series {
		for _, p := range s.Points {
			x.lo, x.hi = math.Min(x.lo, p.X), math.Max(x.hi, p.X)
			y.lo, y.hi = math.Min(y.lo, p.Y), math.Max(y.hi, p.Y)
		}
	}
	return x, y
}

// SVG renders the chart.
func (c *Chart) SVG() []byte {
	xb, yb := c.bounds()
	xa, xs := niceAxis(xb.lo, xb.hi)
	ya, ys := niceAxis(yb.lo, yb.hi)
	var b bytes.Buffer
	frame(&b, c.Title, c.XLabel, c.YLabel)
	xTicks(&b, xa, xs)
	yTicks(&b, ya, ys)
	for i, s := range c.Series {
		drawSeries(&b, s, palette[i%len(palette)], xa, ya)
		legendEntry(&b, i, s.Name, palette[i%len(palette)])
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func px(a axis, v float64) float64 { return padL + a.frac(v)*plotW }
func py(a axis, v float64) float64 { return padT + (1-a.frac(v))*plotH }

func drawSeries(b *bytes.Buffer, s Series, color string, xa, ya axis) {
	if s.Scatter {
		for _, p := range s.Points {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="1.8" fill="%s" fill-opacity="0.7"/>`+"\n", px(xa, p.X), py(ya, p.Y), color)
		}
		return
	}
	dash := ""
	if s.Dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	b.WriteString(`<polyline fill="none" stroke-width="1.6" stroke="` + color + `"` + dash + ` points="`)
	for _, p := range s.Points {
		fmt.Fprintf(b, "%.1f,%.1f ", px(xa, p.X), py(ya, p.Y))
	}
	b.WriteString("\"/>\n")
}

// frame writes the header, title, plot border and axis labels.
func frame(b *bytes.Buffer, title, xlabel, ylabel string) {
	fmt.Fprintf(b, svgHeaderFmt, svgW, svgH, svgW, svgH)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(b, `<text x="%d" y="24" %s font-size="15" font-weight="bold">%s</text>`+"\n", padL, fontFamily, esc(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", padL, padT, plotW, plotH)
	fmt.Fprintf(b, `<text x="%d" y="%d" %s text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-12, fontAttr, esc(xlabel))
	fmt.Fprintf(b, `<text x="16" y="%d" %s text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n",
		padT+plotH/2, fontAttr, padT+plotH/2, esc(ylabel))
}

func xTicks(b *bytes.Buffer, a axis, step float64) {
	for v := a.lo; v <= a.hi+step/2; v += step {
		x := px(a, v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, padT, x, padT+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" %s text-anchor="middle">%s</text>`+"\n", x, padT+plotH+16, fontAttr, fmtTick(v))
	}
}

func yTicks(b *bytes.Buffer, a axis, step float64) {
	for v := a.lo; v <= a.hi+step/2; v += step {
		y := py(a, v)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", padL, y, padL+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" %s text-anchor="end">%s</text>`+"\n", padL-6, y+4, fontAttr, fmtTick(v))
	}
}

func legendEntry(b *bytes.Buffer, i int, name, color string) {
	if name == "" {
		return
	}
	y := legend + i*legendRow
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="8" fill="%s"/>`+"\n", legendX, y-8, color)
	fmt.Fprintf(b, `<text x="%d" y="%d" %s>%s</text>`+"\n", legendX+18, y, fontAttr, esc(name))
}

// SVG renders the bar chart.
func (c *BarChart) SVG() []byte {
	hi := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				hi = math.Max(hi, v)
			}
		}
	}
	ya, ys := niceAxis(0, hi*1.15)
	var b bytes.Buffer
	frame(&b, c.Title, "", c.YLabel)
	yTicks(&b, ya, ys)
	groupW := float64(plotW) / float64(max(1, len(c.Categories)))
	barW := groupW * 0.8 / float64(max(1, len(c.Series)))
	for gi, cat := range c.Categories {
		gx := padL + float64(gi)*groupW
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" %s text-anchor="middle">%s</text>`+"\n", gx+groupW/2, padT+plotH+16, fontAttr, esc(cat))
		for si, s := range c.Series {
			if gi >= len(s.Values) || math.IsNaN(s.Values[gi]) {
				continue
			}
			v := s.Values[gi]
			x := gx + groupW*0.1 + float64(si)*barW
			y := py(ya, v)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, barW-2, float64(padT+plotH)-y, palette[si%len(palette)])
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" %s font-size="10" text-anchor="middle">%s</text>`+"\n", x+barW/2-1, y-3, fontFamily, fmtTick(round3(v)))
		}
	}
	for i, s := range c.Series {
		legendEntry(&b, i, s.Name, palette[i%len(palette)])
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// round3 keeps three significant digits.
func round3(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

func esc(s string) string { return html.EscapeString(s) }
