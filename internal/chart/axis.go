package chart

import "math"

// axis maps values to x coordinates between x0 and x1.
type axis struct {
	log      bool
	min, max float64 // the axis's range (log: powers of ten)
	x0, x1   float64
	ticks    []float64
}

// newAxis makes an axis over values: from 0 to a round number at or above
// the largest (linear), or from the decade at or below the smallest to the
// decade at or above the largest (log). Values that cannot be drawn are
// ignored; with none, the axis runs from 0 to 1 (log: 1 to 10).
func newAxis(values []float64, log bool, x0, x1 float64) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if drawable(v, log) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	a := axis{log: log, x0: x0, x1: x1}
	if log {
		if math.IsInf(lo, 1) {
			lo, hi = 1, 10
		}
		a.min = math.Pow(10, math.Floor(math.Log10(lo)))
		a.max = math.Pow(10, math.Ceil(math.Log10(hi)))
		if a.max <= a.min {
			a.max = a.min * 10
		}
		for t := a.min; t <= a.max*1.0001; t *= 10 {
			a.ticks = append(a.ticks, t)
		}
		return a
	}
	if math.IsInf(hi, -1) || hi <= 0 {
		hi = 1
	}
	step := niceStep(hi / 5)
	a.max = math.Ceil(hi/step-1e-9) * step
	for t := 0.0; t <= a.max+step/2; t += step {
		a.ticks = append(a.ticks, t)
	}
	return a
}

// niceStep returns the smallest of 1, 2 and 5 times a power of ten at or
// above x (x > 0).
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// x is v's coordinate, clamped to the axis.
func (a axis) x(v float64) float64 {
	var f float64
	if a.log {
		f = (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	} else {
		f = v / a.max
	}
	f = math.Max(0, math.Min(1, f))
	return a.x0 + f*(a.x1-a.x0)
}

// draw writes the axis line, its ticks with their labels and grid lines from
// top to bottom, and the unit under it.
func (a axis) draw(s *svg, top, bottom float64, unit string) {
	for _, t := range a.ticks {
		x := a.x(t)
		s.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e0e0e0"/>`+"\n", px(x), px(top), px(x), px(bottom))
		s.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#333333">%s</text>`+"\n", px(x), px(bottom+14), num(t))
	}
	s.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>`+"\n", px(a.x0), px(bottom), px(a.x1), px(bottom))
	label := unit
	if a.log {
		label += " (logarithmic scale)"
	}
	s.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#333333">%s</text>`+"\n", px((a.x0+a.x1)/2), px(bottom+30), esc(label))
}
