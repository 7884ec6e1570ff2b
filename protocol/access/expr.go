package access

import (
	"fmt"
	"strings"
	"unicode"
)

// Answer is what a check says of a request, and what a rule's condition
// comes to: Kleene's three values, and pending while the request has not
// yet shown what a check looks at.
type Answer uint8

const (
	No      Answer = iota
	Yes            // the check holds
	Unknown        // its source could not answer (DNS, the hook, the IPAM, the store)
	pending        // it looks at what the request shows later (the account, the identifiers)
)

func (a Answer) String() string {
	switch a {
	case No:
		return "no"
	case Yes:
		return "yes"
	case Unknown:
		return "unknown"
	}
	return "pending"
}

// and is Kleene conjunction, with pending below a definite no only.
func and(a, b Answer) Answer {
	switch {
	case a == No || b == No:
		return No
	case a == pending || b == pending:
		return pending
	case a == Unknown || b == Unknown:
		return Unknown
	}
	return Yes
}

func or(a, b Answer) Answer {
	switch {
	case a == Yes || b == Yes:
		return Yes
	case a == pending || b == pending:
		return pending
	case a == Unknown || b == Unknown:
		return Unknown
	}
	return No
}

func not(a Answer) Answer {
	switch a {
	case Yes:
		return No
	case No:
		return Yes
	}
	return a
}

// expr is a rule's condition. eval asks each check it needs at most once
// and only when the answer so far does not already decide: "a and b" does
// not ask b when a says no.
type expr interface {
	eval(ask func(name string) Answer) Answer
	names(into []string) []string // the checks it names, in order
	String() string
}

type (
	ref     string
	notExpr struct{ e expr }
	binExpr struct {
		op   string // "and", "or"
		l, r expr
	}
)

func (r ref) eval(ask func(string) Answer) Answer { return ask(string(r)) }
func (r ref) names(into []string) []string {
	for _, n := range into {
		if n == string(r) {
			return into
		}
	}
	return append(into, string(r))
}
func (r ref) String() string { return string(r) }

func (n notExpr) eval(ask func(string) Answer) Answer { return not(n.e.eval(ask)) }
func (n notExpr) names(into []string) []string        { return n.e.names(into) }
func (n notExpr) String() string {
	if _, ok := n.e.(binExpr); ok {
		return "not (" + n.e.String() + ")"
	}
	return "not " + n.e.String()
}

func (b binExpr) eval(ask func(string) Answer) Answer {
	l := b.l.eval(ask)
	if b.op == "and" {
		if l == No {
			return No
		}
		return and(l, b.r.eval(ask))
	}
	if l == Yes {
		return Yes
	}
	return or(l, b.r.eval(ask))
}
func (b binExpr) names(into []string) []string { return b.r.names(b.l.names(into)) }
func (b binExpr) String() string {
	side := func(e expr) string {
		if c, ok := e.(binExpr); ok && c.op != b.op {
			return "(" + c.String() + ")"
		}
		return e.String()
	}
	return side(b.l) + " " + b.op + " " + side(b.r)
}

func keyword(s string) bool { return s == "and" || s == "or" || s == "not" }

// parseExpr parses a condition: check names, "not", "and", "or" and
// parentheses; not binds tightest, then and, then or.
func parseExpr(s string) (expr, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q after %q", p.toks[p.i], e.String())
	}
	return e, nil
}

func tokenize(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '(' || c == ')':
			toks = append(toks, string(c))
			i++
		case c < unicode.MaxASCII && (unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' || c == '-'):
			j := i
			for j < len(s) && s[j] < unicode.MaxASCII && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_' || s[j] == '-') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			return nil, fmt.Errorf("%q is not allowed in a condition: use check names, and, or, not and parentheses", string(s[i]))
		}
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("the condition is empty")
	}
	return toks, nil
}

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

func (p *parser) or() (expr, error) { return p.chain("or", p.and) }

func (p *parser) and() (expr, error) { return p.chain("and", p.unary) }

func (p *parser) chain(op string, next func() (expr, error)) (expr, error) {
	l, err := next()
	if err != nil {
		return nil, err
	}
	for p.peek() == op {
		p.i++
		r, err := next()
		if err != nil {
			return nil, err
		}
		l = binExpr{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) unary() (expr, error) {
	t := p.peek()
	p.i++
	switch {
	case t == "":
		return nil, fmt.Errorf("the condition ends where a check name was expected")
	case t == "not":
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notExpr{e}, nil
	case t == "(":
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, fmt.Errorf("a ( is not closed")
		}
		p.i++
		return e, nil
	case t == ")" || keyword(t):
		return nil, fmt.Errorf("%q where a check name was expected", t)
	case !checkName.MatchString(t):
		return nil, fmt.Errorf("%q is not a check name", t)
	}
	return ref(strings.Clone(t)), nil
}
