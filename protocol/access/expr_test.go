package access

import (
	"strings"
	"testing"
)

// TestParseExpr: not binds tightest, then and, then or; parentheses group;
// an error says what is wrong.
func TestParseExpr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"office", "office"},
		{"office and not ptr", "office and not ptr"},
		{"a or b and c", "a or (b and c)"}, // written with the grouping it has
		{"(a or b) and c", "(a or b) and c"},
		{"not (a and b)", "not (a and b)"},
		{"not not a", "not not a"},
		{"a and b and c or d", "(a and b and c) or d"},
		{"  lab-net\tand\n names_2 ", "lab-net and names_2"},
	} {
		e, err := parseExpr(c.in)
		if err != nil {
			t.Errorf("parseExpr(%q): %v", c.in, err)
			continue
		}
		if e.String() != c.want {
			t.Errorf("parseExpr(%q) = %q, want %q", c.in, e.String(), c.want)
		}
		// What String writes parses back to the same.
		if again, err := parseExpr(e.String()); err != nil || again.String() != e.String() {
			t.Errorf("round trip of %q: %v, %v", c.in, again, err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"a and", "ends where a check name was expected"},
		{"(a or b", "not closed"},
		{"a b", `unexpected "b"`},
		{"a && b", `"&" is not allowed`},
		{"and a", `"and" where a check name was expected`},
		{"a or )", `")" where a check name was expected`},
		{"9lives", "is not a check name"},
	} {
		if _, err := parseExpr(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseExpr(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

// TestKleene: a definite answer is reached despite an unknown or a pending
// check where logic allows, and a check is not asked once the answer is
// decided.
func TestKleene(t *testing.T) {
	t.Parallel()
	answers := map[string]Answer{"y": Yes, "n": No, "u": Unknown, "p": pending}
	for _, c := range []struct {
		in   string
		want Answer
	}{
		{"y and n", No}, {"n and u", No}, {"u and n", No}, {"p and n", No},
		{"y and u", Unknown}, {"u and p", pending}, {"y and p", pending},
		{"y or u", Yes}, {"u or y", Yes}, {"p or y", Yes}, {"n or u", Unknown}, {"u or p", pending},
		{"not u", Unknown}, {"not p", pending}, {"not n", Yes},
		{"(u or y) and not n", Yes},
	} {
		e, err := parseExpr(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.eval(func(n string) Answer { return answers[n] }); got != c.want {
			t.Errorf("%s = %s, want %s", c.in, got, c.want)
		}
	}
	e, _ := parseExpr("n and slow or y or slow")
	var asked []string
	got := e.eval(func(n string) Answer { asked = append(asked, n); return answers[n] })
	if got != Yes || strings.Join(asked, ",") != "n,y" {
		t.Errorf("n and slow or y or slow = %s asking %v, want yes asking n,y only", got, asked)
	}
}
