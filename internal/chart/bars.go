package chart

import "strings"

// SVG returns the chart as an SVG document.
func (c Bars) SVG() []byte {
	stacked := len(c.Segments) > 1 && !c.Log
	legend := c.Series
	if len(c.Segments) > 1 {
		legend = c.Segments
	}
	var r rows
	var values []float64
	for _, g := range c.Groups {
		r.counts = append(r.counts, len(g.Bars))
		r.groupLabels = append(r.groupLabels, g.Label)
		for _, b := range g.Bars {
			r.rowLabels = append(r.rowLabels, b.Label)
			r.notes = append(r.notes, c.note(b, stacked))
			values = append(values, c.extent(b, stacked))
		}
	}
	s, l, a := begin(c.Title, c.Subtitle, c.Unit, legend, r, values, c.Log)
	for gi, g := range c.Groups {
		var labels []string
		for bi, b := range g.Bars {
			labels = append(labels, b.Label)
			end := c.bar(s, a, l.rowY[gi][bi], bi, b, g.Label, stacked)
			if note := c.note(b, stacked); note != "" {
				l.note(s, end, l.rowY[gi][bi], note)
			}
		}
		l.labels(s, gi, g.Label, labels)
	}
	return s.close()
}

// note is what is written after bar b: its Note, or its total; nothing if
// it is Quiet.
func (c Bars) note(b Bar, stacked bool) string {
	switch {
	case b.Quiet:
		return ""
	case b.Note != "":
		return b.Note
	default:
		return c.total(b, stacked)
	}
}

// extent is how far bar b reaches: the sum of its drawable values when
// stacked, else its largest.
func (c Bars) extent(b Bar, stacked bool) float64 {
	var sum, largest float64
	for _, v := range b.Values {
		if drawable(v, c.Log) {
			sum += v
			largest = max(largest, v)
		}
	}
	if stacked {
		return sum
	}
	return largest
}

// bar draws bar b (the bi-th of its group) at y and returns where it ends;
// a zero draws nothing. Unstacked, its values overlap from the axis's start.
func (c Bars) bar(s *svg, a axis, y float64, bi int, b Bar, group string, stacked bool) float64 {
	start := a.x0
	end := start
	var from float64
	for i, v := range b.Values {
		if !drawable(v, c.Log) || v == 0 {
			continue
		}
		x0, x1 := start, a.x(v)
		if stacked {
			x0, x1 = a.x(from), a.x(from+v)
			from += v
		}
		colour := color(bi)
		name := ""
		if len(c.Segments) > 1 {
			colour = color(i)
			name = " " + c.Segments[i]
		}
		s.printf(`<rect x="%s" y="%s" width="%s" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
			px(x0), px(y), px(max(x1-x0, 0.5)), rowHeight, colour, esc(strings.TrimSpace(group+" "+b.Label)+name+": "+num(v)))
		end = max(end, x1)
	}
	return end
}

// total is a bar's default note: its values' sum, or the values joined with
// " / " when they are not stacked; "n/a" where a value cannot be drawn.
func (c Bars) total(b Bar, stacked bool) string {
	var sum float64
	var parts []string
	missing := false
	for _, v := range b.Values {
		if !drawable(v, c.Log) {
			missing = true
			continue
		}
		sum += v
		parts = append(parts, num(v))
	}
	switch {
	case len(parts) == 0:
		return "n/a"
	case stacked && missing:
		return num(sum) + " (some n/a)"
	case stacked || len(parts) == 1:
		return num(sum)
	default:
		return strings.Join(parts, " / ")
	}
}
