package chart

// layout places a chart: the head, then rows in groups with a column of
// group labels, a column of row labels (a bar's or a series' name), the
// plot, and room for the notes after it.
type layout struct {
	head                head
	width, height       int // of the document
	plotLeft, plotRight float64
	top, bottom         float64 // of the plot
	rowY                [][]float64
}

// rows is what a layout is made for.
type rows struct {
	counts      []int // rows per group
	groupLabels []string
	rowLabels   []string
	notes       []string
}

// newLayout lays a chart out: wide enough for its labels, a plot of at
// least plotWidth and its longest note.
func newLayout(title, subtitle string, legend []string, r rows) layout {
	gw, rw, nw := longest(r.groupLabels), longest(r.rowLabels), longest(r.notes)
	var l layout
	l.plotLeft = 10 + float64(gw)*boldWidth + 10
	if rw > 0 {
		l.plotLeft += float64(rw)*charWidth + 8
	}
	noteRoom := float64(nw)*charWidth + 14
	l.width = max(minWidth, int(l.plotLeft+plotWidth+noteRoom))
	l.plotRight = float64(l.width) - noteRoom
	l.head = newHead(title, subtitle, legend, l.width)
	l.top = l.head.height()
	y := l.top + groupGap/2
	for _, n := range r.counts {
		var ys []float64
		for i := range n {
			if i > 0 {
				y += rowGap
			}
			ys = append(ys, y)
			y += rowHeight
		}
		l.rowY = append(l.rowY, ys)
		y += groupGap
	}
	l.bottom = y - groupGap/2
	l.height = int(l.bottom) + axisHeight + 6
	return l
}

// begin lays a chart out, writes its head and its axis over values, and
// returns the document, the layout and the axis to draw the rows on.
func begin(title, subtitle, unit string, legend []string, r rows, values []float64, log bool) (*svg, layout, axis) {
	l := newLayout(title, subtitle, legend, r)
	s := &svg{}
	s.open(l.width, l.height, l.head)
	a := newAxis(values, log, l.plotLeft, l.plotRight)
	a.draw(s, l.top, l.bottom, unit)
	return s, l, a
}

func longest(labels []string) int {
	n := 0
	for _, s := range labels {
		n = max(n, len([]rune(s)))
	}
	return n
}

// labels writes a group's label beside its first row and each row's label
// right-aligned before the plot.
func (l layout) labels(s *svg, g int, group string, rows []string) {
	ys := l.rowY[g]
	if len(ys) == 0 {
		return
	}
	s.printf(`<text x="10" y="%s" font-weight="bold">%s</text>`+"\n", px(ys[0]+rowHeight-4), esc(group))
	for i, r := range rows {
		if r == "" || i >= len(ys) {
			continue
		}
		s.printf(`<text x="%s" y="%s" text-anchor="end" fill="#333333">%s</text>`+"\n", px(l.plotLeft-6), px(ys[i]+rowHeight-4), esc(r))
	}
}

// note writes text after the end of a row's drawing, at x.
func (l layout) note(s *svg, x, y float64, text string) {
	s.printf(`<text x="%s" y="%s" fill="#333333">%s</text>`+"\n", px(x+4), px(y+rowHeight-4), esc(text))
}
