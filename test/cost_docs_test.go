package test

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestCostFigures recomputes every dollar figure of docs/cost.md from the page's own
// units and price list, and checks that the per-event table has the in-call retry's row: the prices table gives the prices (the provisioned ones per unit
// at the page's utilization), the page gives a GB's bytes and a month's hours; each row of
// the per-event table and of the Powertools table is its units times those prices; every
// other figure carries its computation after it (<!-- = 305 * 1000 * write -->). A figure
// is right when it is the exact value rounded (or, ending in "…", cut) to the digits
// printed. Every "$" and a digit on the page is one of these.
func TestCostFigures(t *testing.T) {
	md, _ := readFile(t, "docs/cost.md")
	names := costNames(t, md)
	checked := 0

	// The per-event table, which has a row for each path of the runner's writes: a
	// transient failure retried inside the call (idem.WithRetry, the bench's
	// retry_in_call) is 4 write units (reservation, the failed try, re-reservation,
	// completion).
	inCall := false
	for _, row := range tableRows(t, md, "| scenario | write units | read units |", 5) {
		if strings.Contains(row[0], "`retry_in_call`") {
			inCall = true
			if row[1] != "4" || row[2] != "0" {
				t.Errorf("the in-call retry's row gives %s write and %s read units, want 4 and 0 (measured: retry_in_call)", row[1], row[2])
			}
		}
		w, err1 := strconv.ParseFloat(row[1], 64)
		r, once := strings.CutSuffix(row[2], " once")
		rv, err2 := strconv.ParseFloat(r, 64)
		if err1 != nil || err2 != nil {
			t.Errorf("row %q: units %q, %q", row[0], row[1], row[2])
			continue
		}
		for i, price := range []struct{ write, read string }{{"write", "read"}, {"pwrite", "pread"}} {
			want := []float64{1e6 * w * names[price.write]}
			if once {
				want = append(want, 1e6*rv*names[price.read])
			} else {
				want[0] += 1e6 * rv * names[price.read]
			}
			if strings.Contains(row[0], "(+ 1 S3 PUT)") {
				want = append(want, 1e6*names["s3put"])
			}
			if strings.Contains(row[0], "(+ 1 S3 GET)") {
				want = append(want, 1e6*names["s3get"])
			}
			parts := strings.Split(row[3+i], " + ")
			if len(parts) != len(want) {
				t.Errorf("row %q: %q has %d figures, want %d", row[0], row[3+i], len(parts), len(want))
				continue
			}
			for j, p := range parts {
				p, _ = strings.CutSuffix(p, " once")
				checkFigure(t, fmt.Sprintf("row %q, column %d", row[0], 4+i), p, want[j])
				checked++
			}
		}
	}

	if !inCall {
		t.Error("docs/cost.md's per-event table has no row for a transient failure retried inside the call (`retry_in_call`)")
	}

	// The Powertools table: a first run and a duplicate (its writes and reads) on demand,
	// per million, for each.
	for _, row := range tableRows(t, md, "| result (JSON) |", 6) {
		first, dup, reads, dollars := strings.Split(row[2], " / "), strings.Split(row[3], " / "), strings.Split(row[4], " / "), strings.Split(row[5], " / ")
		if len(first) != 2 || len(dup) != 2 || len(reads) != 2 || len(dollars) != 2 {
			t.Errorf("row %q: want idem / Powertools in each cell", row[0])
			continue
		}
		for k := range 2 {
			a, err1 := strconv.ParseFloat(first[k], 64)
			b, err2 := strconv.ParseFloat(dup[k], 64)
			r, err3 := strconv.ParseFloat(reads[k], 64)
			if err1 != nil || err2 != nil || err3 != nil {
				t.Errorf("row %q: units %q, %q, %q", row[0], first[k], dup[k], reads[k])
				continue
			}
			checkFigure(t, "Powertools table, row "+row[0], dollars[k], ((a+b)*names["write"]+r*names["read"])*1e6)
			checked++
		}
	}

	// Every other figure: the prices table's are the prices; the others carry their
	// computation.
	prices := tableText(t, md, "| | on-demand | provisioned |")
	for _, m := range regexp.MustCompile(`\$([0-9][0-9,]*(?:\.[0-9]+)?…?)(<!-- = ([^>]*) -->)?`).FindAllStringSubmatchIndex(md, -1) {
		figure := md[m[2]:m[3]]
		if m[4] < 0 {
			if inside(md, m[0], prices) {
				continue
			}
			t.Errorf("docs/cost.md: $%s (at %q) carries no computation (<!-- = ... -->)", figure, around(md, m[0]))
			continue
		}
		want, err := evalCost(md[m[6]:m[7]], names)
		if err != nil {
			t.Errorf("docs/cost.md: $%s: %v", figure, err)
			continue
		}
		checkFigure(t, fmt.Sprintf("$%s (= %s)", figure, md[m[6]:m[7]]), figure, want)
		checked++
	}
	if checked < 100 {
		t.Errorf("%d figures checked: the page's tables or annotations are no longer found", checked)
	}
}

// costNames returns the page's prices and units: write, read (on demand, per unit),
// wcuhour, rcuhour (provisioned, per hour), pwrite, pread (provisioned, per unit at the
// page's utilization), gbmonth, s3put, s3get, gb (bytes in a GB) and hours (in a month).
func costNames(t *testing.T, md string) map[string]float64 {
	t.Helper()
	prices := tableText(t, md, "| | on-demand | provisioned |")
	num := func(pattern, text string) float64 {
		t.Helper()
		m := regexp.MustCompile(pattern).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("docs/cost.md: nothing matches %s", pattern)
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	n := map[string]float64{
		"write":   num(`\| write \| \$([0-9.]+) per million write request units`, prices) / 1e6,
		"read":    num(`\| read \| \$([0-9.]+) per million read request units`, prices) / 1e6,
		"wcuhour": num(`\$([0-9.]+) per WCU-hour`, prices),
		"rcuhour": num(`\$([0-9.]+) per RCU-hour`, prices),
		"gbmonth": num(`\| storage \| \$([0-9.]+) per GB-month`, prices),
		"s3put":   num(`PUT \$([0-9.]+),`, prices) / num(`per ([0-9,]+) requests`, prices),
		"s3get":   num(`GET \$([0-9.]+) per`, prices) / num(`per ([0-9,]+) requests`, prices),
	}
	// Storage's units: said on the page, or the figures are checked with 10⁹ bytes and
	// 730 hours, and the test fails.
	n["gb"], n["hours"] = 1e9, 730
	switch {
	case strings.Contains(md, "a GB is 10⁹ bytes"):
	case strings.Contains(md, "a GB is 2³⁰ bytes"):
		n["gb"] = 1 << 30
	default:
		t.Error("docs/cost.md does not say how many bytes a GB is (\"a GB is 10⁹ bytes\" or \"a GB is 2³⁰ bytes\")")
	}
	if m := regexp.MustCompile(`a month is ([0-9,]+) hours`).FindStringSubmatch(md); m != nil {
		n["hours"], _ = strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	} else {
		t.Error("docs/cost.md does not say how many hours a month is (\"a month is 730 hours\")")
	}
	util := num(`at ([0-9]+) % utilization`, md) / 100
	n["pwrite"], n["pread"] = n["wcuhour"]/(3600*util), n["rcuhour"]/(3600*util)
	return n
}

// tableText returns the Markdown table whose header line begins with header.
func tableText(t *testing.T, md, header string) string {
	t.Helper()
	i := strings.Index(md, header)
	if i < 0 {
		t.Fatalf("docs/cost.md has no table %q", header)
	}
	text, _, _ := strings.Cut(md[i:], "\n\n")
	return text
}

// tableRows returns the cells of the rows of the table whose header begins with header,
// each row with cells cells.
func tableRows(t *testing.T, md, header string, cells int) [][]string {
	t.Helper()
	return tableCells(t, tableText(t, md, header), cells)
}

// inside reports whether offset i of md is within text, a part of md.
func inside(md string, i int, text string) bool {
	start := strings.Index(md, text)
	return start >= 0 && i >= start && i < start+len(text)
}

func around(md string, i int) string {
	return md[max(0, i-40):min(len(md), i+40)]
}

// checkFigure checks that the figure printed is want, rounded to its digits (or cut, when
// it ends in "…").
func checkFigure(t *testing.T, where, printed string, want float64) {
	t.Helper()
	cut := strings.HasSuffix(printed, "…")
	s := strings.ReplaceAll(strings.TrimSuffix(printed, "…"), ",", "")
	got, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Errorf("%s: %q is not a number", where, printed)
		return
	}
	decimals := 0
	if _, frac, ok := strings.Cut(s, "."); ok {
		decimals = len(frac)
	}
	unit := math.Pow10(-decimals)
	ok := math.Abs(got-want) <= unit/2+1e-12*math.Max(1, want)
	if cut {
		ok = want >= got-1e-15 && want < got+unit
	}
	if !ok {
		t.Errorf("%s: printed %s, computed %.10g", where, printed, want)
	}
}

// evalCost evaluates an expression of numbers, the page's names, + - * / and parentheses.
func evalCost(expr string, names map[string]float64) (float64, error) {
	p := &costParser{names: names}
	for _, r := range strings.ReplaceAll(expr, " ", "") {
		switch {
		case strings.ContainsRune("+-*/()", r):
			p.toks = append(p.toks, string(r))
		case len(p.toks) > 0 && !strings.ContainsAny(p.toks[len(p.toks)-1], "+-*/()") && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.'):
			p.toks[len(p.toks)-1] += string(r)
		default:
			p.toks = append(p.toks, string(r))
		}
	}
	v, err := p.sum()
	if err == nil && p.i != len(p.toks) {
		err = fmt.Errorf("%q: unexpected %q", expr, p.toks[p.i])
	}
	return v, err
}

type costParser struct {
	toks  []string
	i     int
	names map[string]float64
}

func (p *costParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *costParser) sum() (float64, error) {
	v, err := p.product()
	for err == nil && (p.peek() == "+" || p.peek() == "-") {
		op := p.toks[p.i]
		p.i++
		var w float64
		if w, err = p.product(); op == "+" {
			v += w
		} else {
			v -= w
		}
	}
	return v, err
}

func (p *costParser) product() (float64, error) {
	v, err := p.operand()
	for err == nil && (p.peek() == "*" || p.peek() == "/") {
		op := p.toks[p.i]
		p.i++
		var w float64
		if w, err = p.operand(); op == "*" {
			v *= w
		} else {
			v /= w
		}
	}
	return v, err
}

func (p *costParser) operand() (float64, error) {
	tok := p.peek()
	p.i++
	switch {
	case tok == "(":
		v, err := p.sum()
		if err == nil && p.peek() != ")" {
			err = fmt.Errorf("missing )")
		}
		p.i++
		return v, err
	case tok == "":
		return 0, fmt.Errorf("expression ends early")
	}
	if v, ok := p.names[tok]; ok {
		return v, nil
	}
	v, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a number nor one of the page's prices and units", tok)
	}
	return v, nil
}
