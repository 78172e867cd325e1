package statuspage

import (
	"fmt"
	"strings"
	"time"
)

// Chart size in SVG user units (the page scales it to its column).
const (
	chartW = 360
	chartH = 80
)

// chart is a projection's lag chart: a polyline over the last span, ready for the template.
type chart struct {
	W, H   int
	Points string // the polyline's points attribute: "x,y x,y ..."; "" when there is nothing to draw
	Unit   string // "events" or "ms"
	Max    int64  // the top of the y axis, in Unit
	Last   int64  // the last value, in Unit
	Span   string // the time the x axis covers
	N      int    // samples drawn
}

// drawChart draws samples (oldest first) over span ending at the last sample: the lag in
// events when any sample knows it, else in ms (Kinesis). Unknown values are left out.
func drawChart(samples []sample, span time.Duration) chart {
	c := chart{W: chartW, H: chartH, Unit: "events", Span: span.Round(time.Second).String()}
	val := func(s sample) int64 { return s.Events }
	known := len(samples) == 0
	for _, s := range samples {
		known = known || s.Events >= 0
	}
	if !known {
		c.Unit, val = "ms", func(s sample) int64 { return s.Millis }
	}
	var pts []sample
	for _, s := range samples {
		if val(s) >= 0 {
			pts = append(pts, s)
			c.Max = max(c.Max, val(s))
		}
	}
	if len(pts) == 0 {
		return c
	}
	c.N, c.Last = len(pts), val(pts[len(pts)-1])
	top := max(c.Max, 1)
	end := pts[len(pts)-1].At
	var b strings.Builder
	for i, s := range pts {
		x := float64(chartW) * (1 - float64(end.Sub(s.At))/float64(span))
		y := float64(chartH) * (1 - float64(val(s))/float64(top))
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", max(x, 0), y)
	}
	c.Points = b.String()
	return c
}
