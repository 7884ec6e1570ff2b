package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackup: `hallmark backup FILE` copies the SQLite database whole, as
// a database the CLI can be pointed at, and readable by its owner alone;
// it does not replace a file unless told to, never the database itself,
// and on PostgreSQL says to use PostgreSQL's tools.
func TestBackup(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		url := dialects[0].url(t)
		c := newCA(t, url)
		a := c.account()
		c.issued(a, "kept.example.com", "0b01")
		c.want(0, "revoke", "--reason", "superseded", "0b01")

		file := filepath.Join(t.TempDir(), "hallmark-backup.db")
		var rep struct {
			Database      string
			File          string
			Bytes         int64
			SchemaVersion int `json:"schema_version"`
		}
		c.jsonOf(&rep, 0, "backup", "--json", file)
		fi, err := os.Stat(file)
		if err != nil || rep.File != file || rep.Bytes != fi.Size() || rep.SchemaVersion < 12 || rep.Database != url {
			t.Fatalf("backup --json = %+v (file %v, %v)", rep, fi, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("the copy has mode %04o, want 0600: it holds EAB MAC keys and the nonce key", fi.Mode().Perm())
		}

		// The copy is a database: the CLI reads the certificate and its
		// revocation from it.
		restored := &ca{t: t, config: filepath.Join(t.TempDir(), "hallmark.toml")}
		if err := os.WriteFile(restored.config, []byte("[database]\nurl = \"sqlite:"+file+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := restored.want(0, "certs", "show", "0b01")
		if !strings.Contains(r.stdout, "kept.example.com") || !strings.Contains(r.stdout, "superseded") {
			t.Errorf("certs show from the copy lacks the certificate or its revocation:\n%s", r.stdout)
		}

		r = c.want(2, "backup", file)
		if !strings.Contains(r.stderr, "--force") {
			t.Errorf("backup over an existing file: stderr %q does not name --force", r.stderr)
		}
		r = c.want(0, "backup", "--force", file)
		if !strings.Contains(r.stdout, "holds no keys") {
			t.Errorf("backup output does not say the keys are not in it:\n%s", r.stdout)
		}
		self := strings.TrimPrefix(url, "sqlite:")
		if r := c.want(1, "backup", "--force", self); !strings.Contains(r.stderr, "own file") {
			t.Errorf("backup onto the database itself: stderr %q", r.stderr)
		}
		c.want(2, "backup")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		c := newCA(t, dialects[1].url(t))
		file := filepath.Join(t.TempDir(), "copy")
		if r := c.want(2, "backup", file); !strings.Contains(r.stderr, "pg_dump") {
			t.Errorf("backup on PostgreSQL: stderr %q does not point to pg_dump", r.stderr)
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("backup on PostgreSQL left %s: %v", file, err)
		}
	})
}
