package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The canvas: the plot sits between the margins; the legend is right of it, the caption under
// the group labels.
const (
	width        = 860
	height       = 440
	marginLeft   = 72
	marginRight  = 200
	marginTop    = 48
	marginBottom = 96
)

// palette: colours that stay apart in print and for the common colour blindnesses.
var palette = []string{"#1f77b4", "#d95f02", "#7570b3", "#1b9e77"}

// linear maps [d0, d1] onto [r0, r1].
type linear struct{ d0, d1, r0, r1 float64 }

func (s linear) at(v float64) float64 {
	if s.d1 == s.d0 {
		return (s.r0 + s.r1) / 2
	}
	return s.r0 + (v-s.d0)/(s.d1-s.d0)*(s.r1-s.r0)
}

// logScale maps [d0, d1] (both above 0) onto [r0, r1] by their logarithms.
type logScale struct{ d0, d1, r0, r1 float64 }

func (s logScale) at(v float64) float64 {
	return linear{math.Log(s.d0), math.Log(s.d1), s.r0, s.r1}.at(math.Log(v))
}

// niceTicks are the ticks of an axis from 0 that shows top: a step of 1, 2 or 5 times a power
// of ten giving about n intervals, and the axis's end, the first step at or above top.
func niceTicks(top float64, n int) (ticks []float64, end float64) {
	if top <= 0 || math.IsNaN(top) || math.IsInf(top, 0) {
		top = 1
	}
	raw := top / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * pow
	for _, m := range []float64{1, 2, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	k := math.Ceil(top/step - 1e-9)
	for i := 0.0; i <= k; i++ {
		ticks = append(ticks, i*step)
	}
	return ticks, k * step
}

// num formats v with the given decimals, without a trailing ".0" when decimals is 0.
func num(v float64, decimals int) string { return strconv.FormatFloat(v, 'f', decimals, 64) }

// tickLabel formats a tick: as few decimals as the step needs.
func tickLabel(v, step float64) string {
	d := 0
	for s := step; s < 1 && d < 3; s *= 10 {
		d++
	}
	return num(v, d)
}

// canvas collects an SVG document's elements.
type canvas struct{ b strings.Builder }

func (c *canvas) f(format string, a ...any) { fmt.Fprintf(&c.b, format+"\n", a...) }

func (c *canvas) text(x, y float64, anchor, class, s string) {
	c.f(`<text x="%s" y="%s" text-anchor="%s" class="%s">%s</text>`, num(x, 1), num(y, 1), anchor, class,
		html.EscapeString(s))
}

func (c *canvas) line(x1, y1, x2, y2 float64, style string) {
	c.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" style="%s"/>`, num(x1, 1), num(y1, 1), num(x2, 1), num(y2, 1), style)
}

// frame starts the document: the title, the y axis with its ticks and grid, the caption.
func (c *canvas) frame(title, yLabel string, y linear, ticks []float64, caption []string) {
	c.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`,
		width, height, width, height)
	c.f(`<title>%s</title>`, html.EscapeString(title))
	c.f(`<style>text{font-family:Helvetica,Arial,sans-serif;fill:#222}` +
		`.title{font-size:15px;font-weight:bold}.axis{font-size:12px}.tick{font-size:11px}` +
		`.value{font-size:10px}.caption{font-size:10.5px;fill:#555}.legend{font-size:12px}` +
		`.target{font-size:11px;fill:#c00}</style>`)
	c.f(`<rect width="%d" height="%d" fill="#fff"/>`, width, height)
	c.text(marginLeft, 24, "start", "title", title)
	step := 1.0
	if len(ticks) > 1 {
		step = ticks[1] - ticks[0]
	}
	for _, t := range ticks {
		py := y.at(t)
		c.line(marginLeft, py, width-marginRight, py, "stroke:#e4e4e4")
		c.text(marginLeft-6, py+4, "end", "tick", tickLabel(t, step))
	}
	c.line(marginLeft, marginTop, marginLeft, height-marginBottom, "stroke:#222")
	c.line(marginLeft, height-marginBottom, width-marginRight, height-marginBottom, "stroke:#222")
	mid := (marginTop + height - marginBottom) / 2.0
	c.f(`<text x="18" y="%s" text-anchor="middle" class="axis" transform="rotate(-90 18 %s)">%s</text>`,
		num(mid, 1), num(mid, 1), html.EscapeString(yLabel))
	for i, l := range wrap(caption, 120) {
		c.text(marginLeft, height-26+float64(i)*13, "start", "caption", l)
	}
}

// targetLine draws a dashed horizontal line at v, when v is on the axis; the legend names it.
func (c *canvas) targetLine(y linear, v, end float64) {
	if v <= 0 || v > end {
		return
	}
	py := y.at(v)
	c.line(marginLeft, py, width-marginRight, py, targetStyle)
}

const targetStyle = "stroke:#c00;stroke-dasharray:6 4"

// legend draws the series' swatches right of the plot, then the target's line when it has one.
func (c *canvas) legend(names, colors []string, dashed []bool, target string) {
	if target != "" {
		y := float64(marginTop + 10 + 20*len(names))
		c.line(width-marginRight+16, y, width-marginRight+40, y, targetStyle)
		for i, l := range wrap([]string{target}, 22) {
			c.text(width-marginRight+46, y+4+float64(i)*14, "start", "legend", l)
		}
	}
	for i, name := range names {
		y := float64(marginTop + 10 + 20*i)
		style := "stroke:" + colors[i] + ";stroke-width:8"
		if dashed != nil {
			style = "stroke:" + colors[i] + ";stroke-width:2"
			if dashed[i] {
				style += ";stroke-dasharray:5 3"
			}
		}
		c.line(width-marginRight+16, y, width-marginRight+40, y, style)
		c.text(width-marginRight+46, y+4, "start", "legend", name)
	}
}

func (c *canvas) end() string {
	c.f(`</svg>`)
	return c.b.String()
}

// wrap breaks each line into lines of at most n characters, at spaces.
func wrap(lines []string, n int) []string {
	var out []string
	for _, l := range lines {
		cur := ""
		for _, w := range strings.Fields(l) {
			if cur != "" && len(cur)+1+len(w) > n {
				out = append(out, cur)
				cur = ""
			}
			if cur != "" {
				cur += " "
			}
			cur += w
		}
		out = append(out, cur)
	}
	return out
}

// barChart is grouped bars: values[group][series] holds the runs; a bar is their median.
type barChart struct {
	title, yLabel string
	series        []string
	groups        [][]string // each group's label, one string a line
	values        [][][]float64
	target        float64 // a dashed line there when above 0
	targetLabel   string
	decimals      int // of the values printed over the bars
	caption       []string
}

func (b *barChart) svg() string {
	top := b.target
	for _, g := range b.values {
		for _, s := range g {
			for _, v := range s {
				top = max(top, v)
			}
		}
	}
	ticks, end := niceTicks(top*1.08, 5)
	y := linear{0, end, height - marginBottom, marginTop}
	var c canvas
	c.frame(b.title, b.yLabel, y, ticks, b.caption)
	c.targetLine(y, b.target, end)
	groupW := float64(width-marginLeft-marginRight) / float64(max(len(b.groups), 1))
	barW := min(groupW*0.7/float64(max(len(b.series), 1)), 48)
	for gi, label := range b.groups {
		x0 := marginLeft + groupW*float64(gi) + (groupW-barW*float64(len(b.series)))/2
		for si := range b.series {
			vs := b.values[gi][si]
			if len(vs) == 0 {
				continue
			}
			x, v := x0+barW*float64(si), median(vs)
			c.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`, num(x+1, 1), num(y.at(v), 1),
				num(barW-2, 1), num(y.at(0)-y.at(v), 1), palette[si%len(palette)])
			if len(vs) > 1 {
				for _, r := range vs {
					c.line(x+barW*0.25, y.at(r), x+barW*0.75, y.at(r), "stroke:#000;stroke-width:1.5")
				}
			}
			c.text(x+barW/2, y.at(v)-4, "middle", "value", num(v, b.decimals))
		}
		for li, l := range label {
			c.text(marginLeft+groupW*(float64(gi)+0.5), height-marginBottom+16+float64(li)*13, "middle", "tick", l)
		}
	}
	colors := make([]string, len(b.series))
	for i := range colors {
		colors[i] = palette[i%len(palette)]
	}
	c.legend(b.series, colors, nil, b.targetLabel)
	return c.end()
}

// point is a line's point: the median y of its runs, and the runs.
type point struct {
	x, y float64
	runs []float64
}

type lineSeries struct {
	name, color string
	dashed      bool
	points      []point
}

// lineChart is lines over a logarithmic x axis with a tick at each x of the data.
type lineChart struct {
	title, xLabel, yLabel string
	xTicks                []float64
	xNotes                map[float64]string // a second line under a tick's label
	series                []lineSeries
	target                float64
	targetLabel           string
	caption               []string
}

func (l *lineChart) svg() string {
	top := l.target
	for _, s := range l.series {
		for _, p := range s.points {
			for _, r := range p.runs {
				top = max(top, r)
			}
		}
	}
	ticks, end := niceTicks(top*1.05, 6)
	y := linear{0, end, height - marginBottom, marginTop}
	lo, hi := 1.0, 1.0
	if len(l.xTicks) > 0 {
		lo, hi = l.xTicks[0], l.xTicks[len(l.xTicks)-1]
	}
	pad := 24.0
	x := logScale{lo, hi, marginLeft + pad, width - marginRight - pad}
	if lo == hi {
		x = logScale{lo / 2, hi * 2, marginLeft + pad, width - marginRight - pad}
	}
	var c canvas
	c.frame(l.title, l.yLabel, y, ticks, l.caption)
	for _, t := range l.xTicks {
		px := x.at(t)
		c.line(px, height-marginBottom, px, height-marginBottom+4, "stroke:#222")
		c.text(px, height-marginBottom+16, "middle", "tick", num(t, 0))
		if note := l.xNotes[t]; note != "" {
			c.text(px, height-marginBottom+29, "middle", "target", note)
		}
	}
	c.text((marginLeft+width-marginRight)/2.0, height-marginBottom+46, "middle", "axis", l.xLabel)
	c.targetLine(y, l.target, end)
	var names, colors []string
	var dashed []bool
	for _, s := range l.series {
		var pts []string
		for _, p := range s.points {
			pts = append(pts, num(x.at(p.x), 1)+","+num(y.at(p.y), 1))
		}
		style := "fill:none;stroke-width:2;stroke:" + s.color
		if s.dashed {
			style += ";stroke-dasharray:5 3"
		}
		c.f(`<polyline points="%s" style="%s"/>`, strings.Join(pts, " "), style)
		for _, p := range s.points {
			for _, r := range p.runs {
				c.f(`<circle cx="%s" cy="%s" r="3" fill="%s"/>`, num(x.at(p.x), 1), num(y.at(r), 1), s.color)
			}
		}
		names, colors, dashed = append(names, s.name), append(colors, s.color), append(dashed, s.dashed)
	}
	c.legend(names, colors, dashed, l.targetLabel)
	return c.end()
}
