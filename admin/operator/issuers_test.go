package operator

import (
	"errors"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
)

// TestIssuerKeysAt: a profile is rotated only to issuers whose key is
// where its backend keeps keys (ca.dir, or its own token).
func TestIssuerKeysAtRefusesAnotherPlace(t *testing.T) {
	recs := []store.IssuerRecord{{ID: "aa"}, {ID: "bb", Backend: "softhsm"}, {ID: "cc", Backend: "luna"}}
	for _, tc := range []struct {
		keys string
		to   []string
		ok   bool
	}{
		{"", []string{"aa"}, true},
		{"", []string{"aa", "bb"}, false},
		{"softhsm", []string{"bb"}, true},
		{"softhsm", []string{"aa"}, false},
		{"softhsm", []string{"cc"}, false},
		{"softhsm", []string{"unknown"}, true}, // the rotation refuses it: ErrNotFound
	} {
		err := issuerKeysAt(recs, tc.keys, tc.to)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, store.ErrConflict)) {
			t.Errorf("issuerKeysAt(%q, %v) = %v; want ok %v", tc.keys, tc.to, err, tc.ok)
		}
	}
}
