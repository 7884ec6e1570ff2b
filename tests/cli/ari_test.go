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
// match exits 0, lists the serial and is audited once.
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
