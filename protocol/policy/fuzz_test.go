package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// FuzzPolicy checks one DNS and one IP identifier built from arbitrary
// strings: every refusal is a typed problem whose subproblems name their
// identifiers, and whatever is accepted is already normal (checking it again
// changes nothing).
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{"a.example.com", "*.Example.COM.", "xn--bcher-kva.example", "a.*.b", "*", "10.0.0.1", "2001:DB8::1", "fe80::1%eth0", "_x.example", strings.Repeat("a", 64) + ".example", "evilexample.com", "a.secret.example.com"} {
		f.Add(s, s)
	}
	p, err := New(strictPo)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, dnsValue, ipValue string) {
		ids := []acme.Identifier{{Type: acme.IdentifierDNS, Value: dnsValue}, {Type: acme.IdentifierIP, Value: ipValue}}
		out, err := p.Check(ids, both)
		if err != nil {
			var ae *acme.Error
			if !errors.As(err, &ae) {
				t.Fatalf("%v is not an *acme.Error", err)
			}
			switch ae.Problem.Type {
			case acme.ProblemMalformed, acme.ProblemRejectedIdentifier, acme.ProblemUnsupportedIdentifier, acme.ProblemCompound:
			default:
				t.Fatalf("unexpected problem type %s", ae.Problem.Type)
			}
			if len(ae.Problem.Subproblems) == 0 {
				t.Fatalf("no subproblems in %v", err)
			}
			for _, sp := range ae.Problem.Subproblems {
				if sp.Identifier == nil || sp.Detail == "" {
					t.Fatalf("subproblem %+v lacks identifier or detail", sp)
				}
			}
			return
		}
		for _, id := range out {
			if id.Type == acme.IdentifierDNS && (id.Value != strings.ToLower(id.Value) || strings.HasSuffix(id.Value, ".") || len(id.Value) > 253) {
				t.Fatalf("accepted un-normalised %v", id)
			}
		}
		again, err := p.Check(out, both)
		if err != nil || len(again) != len(out) {
			t.Fatalf("normalised %v does not pass again: %v %v", out, again, err)
		}
		for i := range out {
			if again[i] != out[i] {
				t.Fatalf("normalisation not idempotent: %v then %v", out, again)
			}
		}
	})
}
