package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed postgres/*.up.sql sqlite/*.up.sql
var files embed.FS

// Dialects are the databases Hallmark runs on.
var Dialects = []string{"postgres", "sqlite"}

// File is one forward migration.
type File struct {
	Version int    // the NNNN prefix
	Name    string // the file name, e.g. "0001_init.up.sql"
	SQL     string
}

// Files returns the dialect's migrations in version order. It fails if a
// file is misnamed or two files share a version.
func Files(dialect string) ([]File, error) {
	entries, err := fs.ReadDir(files, dialect)
	if err != nil {
		return nil, fmt.Errorf("reading migrations for dialect %q: %w", dialect, err)
	}
	var out []File
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".up.sql") {
			return nil, fmt.Errorf("migration %s/%s is not named NNNN_name.up.sql", dialect, name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s/%s has no positive version number", dialect, name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s/%s and %s share version %d", dialect, prev, name, v)
		}
		seen[v] = name
		b, err := files.ReadFile(path.Join(dialect, name))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s/%s: %w", dialect, name, err)
		}
		out = append(out, File{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Latest is the newest version the dialect's files know (0 for none).
func Latest(dialect string) (int, error) {
	fs, err := Files(dialect)
	if err != nil || len(fs) == 0 {
		return 0, err
	}
	return fs[len(fs)-1].Version, nil
}
