package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestAdminSecureCookies: admin.secure_cookies, read from the
// configuration file, reaches the panel: with it every cookie the panel
// sets carries Secure (a browser then sends it only over HTTPS, for the
// panel behind a TLS-terminating proxy); without it, the default for the
// plain-HTTP loopback listener, none does.
func TestAdminSecureCookies(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := testdb.SQLite(t)
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	db, err := open.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t.Setenv("HALLMARK_TEST_ADMIN_TOKEN", "0123456789abcdef0123456789abcdef")
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("secure_cookies=%v", secure), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hallmark.toml")
			toml := fmt.Sprintf("[database]\nurl = %q\n[admin]\nlisten = \"127.0.0.1:0\"\ntoken_env = \"HALLMARK_TEST_ADMIN_TOKEN\"\nsecure_cookies = %v\n", url, secure)
			if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			if _, err := serveAdmin(ctx, "", cfg, db, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`url=(http://[^ ]+/)`).FindStringSubmatch(logs.String())
			if m == nil {
				t.Fatalf("no URL logged: %s", logs.String())
			}
			var resp *http.Response
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if resp, err = http.Get(m[1] + "login"); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			cookies := resp.Cookies()
			if len(cookies) == 0 {
				t.Fatal("the sign-in page set no cookie")
			}
			for _, c := range cookies {
				if c.Secure != secure {
					t.Errorf("cookie %s: Secure = %v, want %v (%s)", c.Name, c.Secure, secure, resp.Header.Values("Set-Cookie"))
				}
			}
		})
	}
}
