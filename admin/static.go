package admin

import (
	"io/fs"
	"net/http"
	"strings"
)

// filesOnly serves the files of fsys (the panel's stylesheet, public so
// the login page is styled) and answers 404 for a directory, so no one
// without credentials can list what the panel ships.
func filesOnly(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path
		if name == "" || strings.HasSuffix(name, "/") {
			http.NotFound(w, r)
			return
		}
		if fi, err := fs.Stat(fsys, name); err != nil || fi.IsDir() {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}
