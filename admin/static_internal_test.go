package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

// TestFilesOnlyNested: the embedded assets have no subdirectory, so a file
// system with one shows that filesOnly serves a nested file and lists no
// directory, nested or not.
func TestFilesOnlyNested(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"style.css": {Data: []byte("a{}")}, "sub/img.svg": {Data: []byte("<svg/>")}}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", filesOnly(fsys)))
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/static/sub/img.svg", 200},
		{"/static/style.css", 200},
		{"/static/", 404},
		{"/static/sub/", 404},
		{"/static/sub", 404},
		{"/static/sub/index.html", 404},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != tc.want {
			t.Errorf("GET %s: status %d, want %d\n%s", tc.path, rec.Code, tc.want, body)
		}
		if tc.want == 404 && (strings.Contains(string(body), "img.svg") || strings.Contains(string(body), "style.css")) {
			t.Errorf("GET %s lists files:\n%s", tc.path, body)
		}
	}
}
