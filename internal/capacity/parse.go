package capacity

import (
	"fmt"
	"strings"
)

// clause is one SET, REMOVE, ADD or DELETE clause of an update expression.
type clause struct {
	verb    string
	actions []action
}

// action is one action of a clause: the attribute it writes and, but for
// REMOVE, its operand.
type action struct {
	path  string
	value *operand
}

// operand is a value (":v"), a path, or a function of operands: if_not_exists,
// list_append, "+" or "-".
type operand struct {
	value, path, fn string
	args            []*operand
}

// parser reads an update expression's tokens.
type parser struct {
	toks []string
	i    int
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *parser) next() string { t := p.peek(); p.i++; return t }

func (p *parser) expect(t string) error {
	if got := p.next(); got != t {
		return fmt.Errorf("%w: want %q, got %q", ErrUnsupported, t, got)
	}
	return nil
}

// parseUpdate parses an update expression into its clauses.
func parseUpdate(expr string) ([]clause, error) {
	p := &parser{toks: tokenize(expr)}
	var out []clause
	for p.peek() != "" {
		verb := strings.ToUpper(p.next())
		if verb != "SET" && verb != "REMOVE" && verb != "ADD" && verb != "DELETE" {
			return nil, fmt.Errorf("%w: clause %q", ErrUnsupported, verb)
		}
		c := clause{verb: verb}
		for {
			a, err := p.action(verb)
			if err != nil {
				return nil, err
			}
			c.actions = append(c.actions, a)
			if p.peek() != "," {
				break
			}
			p.next()
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty expression", ErrUnsupported)
	}
	return out, nil
}

func (p *parser) action(verb string) (action, error) {
	a := action{path: p.next()}
	if !isName(a.path) {
		return a, fmt.Errorf("%w: %q is not an attribute", ErrUnsupported, a.path)
	}
	var err error
	switch verb {
	case "REMOVE":
	case "SET":
		if err = p.expect("="); err == nil {
			a.value, err = p.expr()
		}
	default:
		a.value, err = p.term()
	}
	return a, err
}

// expr is term [(+|-) term].
func (p *parser) expr() (*operand, error) {
	t, err := p.term()
	if err != nil {
		return nil, err
	}
	if op := p.peek(); op == "+" || op == "-" {
		p.next()
		u, err := p.term()
		if err != nil {
			return nil, err
		}
		return &operand{fn: op, args: []*operand{t, u}}, nil
	}
	return t, nil
}

// term is :value, a path, or fn(expr, expr).
func (p *parser) term() (*operand, error) {
	t := p.next()
	switch {
	case strings.HasPrefix(t, ":"):
		return &operand{value: t}, nil
	case p.peek() == "(":
		fn := strings.ToLower(t)
		if fn != "if_not_exists" && fn != "list_append" {
			return nil, fmt.Errorf("%w: function %s", ErrUnsupported, t)
		}
		p.next()
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		b, err := p.expr()
		if err != nil {
			return nil, err
		}
		if fn == "if_not_exists" && a.path == "" {
			return nil, fmt.Errorf("%w: if_not_exists of a non-path", ErrUnsupported)
		}
		return &operand{fn: fn, args: []*operand{a, b}}, p.expect(")")
	case isName(t):
		return &operand{path: t}, nil
	}
	return nil, fmt.Errorf("%w: unexpected %q", ErrUnsupported, t)
}

// isName reports whether t is an attribute path token.
func isName(t string) bool {
	return t != "" && !strings.HasPrefix(t, ":") && !strings.ContainsAny(t, "(),=+-")
}

// tokenize splits an expression into names and placeholders (runs of other
// than blanks and punctuation) and the punctuation ( ) , = + -.
func tokenize(s string) []string {
	var toks []string
	start := -1
	flush := func(i int) {
		if start >= 0 {
			toks = append(toks, s[start:i])
			start = -1
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush(i)
		case strings.IndexByte("(),=+-", c) >= 0:
			flush(i)
			toks = append(toks, string(c))
		default:
			if start < 0 {
				start = i
			}
		}
	}
	flush(len(s))
	return toks
}
