package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestARIMove: `hallmark ari move` answers the same as a table and as
// JSON: a selection that matches nothing exits 4 (nothing to do), prints
// "moved": [] (lists are arrays, never null) and writes no audit event; a
// match exits 0, lists the serial and is audited once; `certs show` then
// shows the moved window, as clients are told it.
func TestARIMove(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			c.issued(c.account(), "move.example.com", "a1")
			moves := func() int {
				n := 0
				for _, ev := range c.audit() {
					if ev.Action == "ari.move" {
						n++
					}
				}
				return n
			}
			// Before a move, `certs show` says clients are told the
			// profile's window; after it, the operator's, with the reason
			// (renewalInfo's own rule, protocol/renewal).
			shown := func() (source, reason string) {
				var out struct {
					RenewalWindow struct{ Source, Reason string } `json:"renewal_window"`
				}
				c.jsonOf(&out, 0, "certs", "show", "--json", "a1")
				return out.RenewalWindow.Source, out.RenewalWindow.Reason
			}
			if src, _ := shown(); src != "profile" {
				t.Errorf("certs show before a move: renewal window source %q, want profile", src)
			}
			defer func() {
				if src, why := shown(); src != "operator" || why != "key rollover" {
					t.Errorf("certs show after a move: renewal window %q %q, want the operator's, key rollover", src, why)
				}
				if r := c.want(0, "certs", "show", "a1"); !strings.Contains(r.stdout, "moved by an operator: key rollover") {
					t.Errorf("certs show after a move does not say so:\n%s", r.stdout)
				}
			}()
			for _, tc := range []struct {
				name  string
				args  []string
				code  int
				moved []string
			}{
				{"no match, table", []string{"--account", "nope"}, 4, nil},
				{"no match, json", []string{"--json", "--account", "nope"}, 4, []string{}},
				{"a match, json", []string{"--json", "--serial", "a1"}, 0, []string{"a1"}},
				{"a match, table", []string{"--serial", "a1"}, 0, nil},
			} {
				before := moves()
				r := c.want(tc.code, append([]string{"ari", "move", "--reason", "key rollover"}, tc.args...)...)
				if tc.moved != nil {
					var out struct {
						Moved *[]string `json:"moved"`
					}
					if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Moved == nil || !slices.Equal(*out.Moved, tc.moved) {
						t.Errorf("%s: stdout %s (%v), want {\"moved\": %q}", tc.name, r.stdout, err, tc.moved)
					}
				}
				if tc.code == 4 && !strings.Contains(r.stderr, "nothing moved") {
					t.Errorf("%s: stderr %q, want 'nothing moved'", tc.name, r.stderr)
				}
				want := before
				if tc.code == 0 {
					want++
				}
				if got := moves(); got != want {
					t.Errorf("%s: %d ari.move audit events, want %d", tc.name, got, want)
				}
			}
		})
	}
}
