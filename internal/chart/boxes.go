package chart

// SVG returns the chart as an SVG document.
func (c Boxes) SVG() []byte {
	var r rows
	var values []float64
	for _, g := range c.Groups {
		r.counts = append(r.counts, len(g.Boxes))
		r.groupLabels = append(r.groupLabels, g.Label)
		for _, b := range g.Boxes {
			r.notes = append(r.notes, boxNote(b))
			if b != nil {
				values = append(values, b.Low, b.Q1, b.Median, b.Q3, b.High)
			}
		}
	}
	if c.Ref != nil {
		values = append(values, c.Ref.Value)
	}
	if len(c.Series) > 1 {
		r.rowLabels = c.Series
	}
	s, l, a := begin(c.Title, c.Subtitle, c.Unit, c.Series, r, values, c.Log)
	for gi, g := range c.Groups {
		var labels []string
		for bi, b := range g.Boxes {
			if len(c.Series) > 1 && bi < len(c.Series) {
				labels = append(labels, c.Series[bi])
			}
			y := l.rowY[gi][bi]
			end, note := c.box(s, a, y, bi, b, g.Label)
			l.note(s, end, y, note)
		}
		l.labels(s, gi, g.Label, labels)
	}
	if c.Ref != nil && drawable(c.Ref.Value, c.Log) {
		x := a.x(c.Ref.Value)
		s.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#D55E00" stroke-width="1.5" stroke-dasharray="5,3"/>`+"\n",
			px(x), px(l.top), px(x), px(l.bottom))
		s.printf(`<text x="%s" y="%s" fill="#D55E00">%s</text>`+"\n", px(x+4), px(l.top+10), esc(c.Ref.Label))
	}
	return s.close()
}

// box draws box b (series bi) at y; it returns where the drawing ends and
// the note to write after it.
func (c Boxes) box(s *svg, a axis, y float64, bi int, b *Box, group string) (float64, string) {
	if b == nil {
		return a.x0, "no data"
	}
	q := []float64{b.Low, b.Q1, b.Median, b.Q3, b.High}
	for _, v := range q {
		if !drawable(v, c.Log) {
			return a.x0, "n/a"
		}
	}
	colour, mid := color(bi), y+rowHeight/2
	xl, x1, xm, x3, xh := a.x(b.Low), a.x(b.Q1), a.x(b.Median), a.x(b.Q3), a.x(b.High)
	name := group
	if bi < len(c.Series) {
		name += " " + c.Series[bi]
	}
	s.printf(`<g><title>%s: %s, %s, %s, %s, %s</title>`+"\n", esc(name), num(b.Low), num(b.Q1), num(b.Median), num(b.Q3), num(b.High))
	s.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", px(xl), px(mid), px(xh), px(mid), colour)
	for _, x := range []float64{xl, xh} {
		s.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", px(x), px(y+3), px(x), px(y+rowHeight-3), colour)
	}
	s.printf(`<rect x="%s" y="%s" width="%s" height="%d" fill="%s" fill-opacity="0.35" stroke="%s"/>`+"\n",
		px(x1), px(y), px(max(x3-x1, 0.5)), rowHeight, colour, colour)
	s.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"/>`+"\n", px(xm), px(y), px(xm), px(y+rowHeight), colour)
	s.printf("</g>\n")
	return xh, boxNote(b)
}

// boxNote is what is written after box b: its Note, or its median.
func boxNote(b *Box) string {
	switch {
	case b == nil:
		return "no data"
	case b.Note != "":
		return b.Note
	default:
		return num(b.Median)
	}
}
