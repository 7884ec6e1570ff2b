package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestCertsExpiringFilter: the certificates page's expiring filter takes a
// date; one that does not parse is the operator's typing, answered 400
// with what it wants, not 404 as if the page did not exist.
func TestCertsExpiringFilter(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	for _, tc := range []struct {
		query string
		code  int
		say   string
	}{
		{"expiring=2030-01-02", http.StatusOK, ""},
		{"expiring=next-week", http.StatusBadRequest, "YYYY-MM-DD"},
		{"expiring=2030-13-01", http.StatusBadRequest, "YYYY-MM-DD"},
	} {
		resp, body := do(t, c, "GET", srv.URL+"/certs?"+tc.query, "Bearer "+token, nil)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.say) {
			t.Errorf("/certs?%s: %d, want %d saying %q", tc.query, resp.StatusCode, tc.code, tc.say)
		}
	}
}
