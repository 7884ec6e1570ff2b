package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestStaticListsNothing: the panel's /static/ serves its stylesheet
// without credentials (the login page uses it) but answers 404 for the
// directory and never lists the files.
func TestStaticListsNothing(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/static/style.css", 200},
		{"/static/", 404},
		{"/static/no-such.css", 404},
		{"/static/no-such-dir/", 404},
	} {
		resp, body := do(t, c, "GET", srv.URL+tc.path, "", nil)
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s: status %d, want %d\n%s", tc.path, resp.StatusCode, tc.want, body)
		}
		if tc.want == 404 && strings.Contains(body, "style.css") {
			t.Errorf("GET %s lists the files:\n%s", tc.path, body)
		}
	}
}
