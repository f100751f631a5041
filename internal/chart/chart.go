// Package chart draws the benchmark's charts as SVG with the standard library
// only: horizontal bar charts (bars grouped by row, each bar stacked from
// segments) and horizontal box plots, on a linear or logarithmic axis.
//
// A chart is a value; its SVG method returns a complete, self-contained SVG
// document (no scripts, no external fonts or styles), the same bytes for the
// same chart. Numbers that cannot be drawn (negative, NaN, infinite, or not
// positive on a logarithmic axis) are left out of the drawing and noted in
// the row's label, never drawn as zero.
package chart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bars is a horizontal bar chart. Each group is a labelled row of bars; each
// bar is stacked from its values, one per segment. With two segments or
// more, the segments have the colours of the legend (Segments) and the bars
// of a group are told apart by their labels; with one, each bar has the
// colour of its position in the group (Series).
type Bars struct {
	Title    string
	Subtitle string // a second line under the title: the run, the machine
	Unit     string // the axis's label
	Log      bool   // a logarithmic axis (unstacked bars only)
	Series   []string
	Segments []string
	Groups   []BarGroup
}

// BarGroup is one row of Bars.
type BarGroup struct {
	Label string
	Bars  []Bar
}

// Bar is one bar: its label ("" for none), its values by segment, and the
// note written after it (default: the total; none if Quiet).
type Bar struct {
	Label  string
	Values []float64
	Note   string
	Quiet  bool
}

// Boxes is a horizontal box plot: each group a labelled row of boxes, one
// per series (the legend), with an optional reference line.
type Boxes struct {
	Title    string
	Subtitle string
	Unit     string
	Log      bool
	Series   []string
	Groups   []BoxGroup
	Ref      *Reference
}

// BoxGroup is one row of Boxes; a nil box is a series without data.
type BoxGroup struct {
	Label string
	Boxes []*Box
}

// Box is a distribution: whiskers from Low to High, a box from Q1 to Q3, a
// line at the Median; Note is written after it (default: the median).
type Box struct {
	Low, Q1, Median, Q3, High float64
	Note                      string
}

// Reference is a vertical line across the plot at Value, with a label.
type Reference struct {
	Value float64
	Label string
}

// Palette is the colours of series and segments, in order (Okabe and Ito's
// colour-blind-safe set); the ninth and later reuse them.
var Palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// Layout, in pixels.
const (
	minWidth   = 860
	plotWidth  = 440 // at least
	rowHeight  = 16  // one bar or box
	rowGap     = 3   // between bars of a group
	groupGap   = 10  // between groups
	charWidth  = 6.6 // of the 11 px font, for the labels' column
	boldWidth  = 7.2 // of the 11 px bold font (group labels)
	titleRow   = 26  // the title's line
	lineHeight = 15  // a subtitle's line
	legendRow  = 20
	axisHeight = 36
)

// color is the colour of series or segment i.
func color(i int) string { return Palette[i%len(Palette)] }

// num formats a number for a note or a tick: up to three significant
// decimals, no trailing zeros.
func num(x float64) string {
	switch ax := math.Abs(x); {
	case ax >= 100 || x == math.Trunc(x):
		return strconv.FormatFloat(x, 'f', 0, 64)
	case ax >= 10:
		return trim(strconv.FormatFloat(x, 'f', 1, 64))
	case ax >= 1:
		return trim(strconv.FormatFloat(x, 'f', 2, 64))
	default:
		return trim(strconv.FormatFloat(x, 'g', 3, 64))
	}
}

func trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// px formats a coordinate.
func px(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// esc escapes text for an SVG text node or attribute.
func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // a bytes.Buffer's writes do not fail
	return b.String()
}

// drawable reports whether x can be drawn on the axis.
func drawable(x float64, log bool) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 && (!log || x > 0)
}

// svg is a document being written.
type svg struct {
	b bytes.Buffer
}

func (s *svg) printf(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// head is what comes above the plot: the title, the subtitle wrapped to the
// document's width, and the legend.
type head struct {
	title    string
	subtitle []string // lines
	legend   []string
}

func newHead(title, subtitle string, legend []string, width int) head {
	return head{title: title, subtitle: wrap(subtitle, int(float64(width-20)/charWidth)), legend: legend}
}

// height is the head's height.
func (h head) height() float64 {
	y := float64(titleRow + lineHeight*len(h.subtitle) + 4)
	if len(h.legend) > 0 {
		y += legendRow
	}
	return y
}

// open writes the document's start and the head.
func (s *svg) open(width, height int, h head) {
	s.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	s.printf(`<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	s.printf(`<text x="10" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", esc(h.title))
	y := float64(titleRow)
	for _, line := range h.subtitle {
		s.printf(`<text x="10" y="%s" fill="#555555">%s</text>`+"\n", px(y+8), esc(line))
		y += lineHeight
	}
	y += 4
	x := 10.0
	for i, name := range h.legend {
		s.printf(`<rect x="%s" y="%s" width="10" height="10" fill="%s"/>`+"\n", px(x), px(y), color(i))
		s.printf(`<text x="%s" y="%s">%s</text>`+"\n", px(x+14), px(y+9), esc(name))
		x += 14 + float64(len([]rune(name)))*charWidth + 18
	}
}

// wrap breaks text into lines of at most n runes at spaces (a longer word
// is a line of its own).
func wrap(text string, n int) []string {
	var lines []string
	var line string
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case len([]rune(line))+1+len([]rune(w)) <= n:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func (s *svg) close() []byte {
	s.printf("</svg>\n")
	return s.b.Bytes()
}
