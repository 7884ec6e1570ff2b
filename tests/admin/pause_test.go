package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// startPausingCA is startCA on the database at dbURL, pausing an account
// for a name after 2 failed validations over a day.
func startPausingCA(t *testing.T, dbURL string) *ca {
	t.Helper()
	dir := t.TempDir()
	adminListen := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &ca{token: adminToken, adminURL: "http://" + adminListen}
	c.CA = harness.StartCA(t, dbURL, harness.Options{Dir: dir, Tables: fmt.Sprintf(`
[admin]
listen = %q
token_file = "admin.token"

[limits]
pause_after_days = 1
pause_min_failures = 2
`, adminListen)})
	if !harness.WaitOK(http.DefaultClient, c.adminURL+"/healthz", time.Now().Add(30*time.Second)) {
		t.Fatalf("the frontend at %s (admin %s) did not become ready", c.BaseURL, c.adminURL)
	}
	return c
}

// ageRuns moves the runs of failed validations d back, as the database
// clock moving d forward would age them; no test sleeps for days.
func ageRuns(t *testing.T, dbURL string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "UPDATE validation_streaks SET first_failed_at = first_failed_at - ?", d.Microseconds()); err != nil {
			t.Fatal(err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE validation_streaks SET first_failed_at = first_failed_at - $1::bigint * interval '1 microsecond'", d.Microseconds()); err != nil {
		t.Fatal(err)
	}
}

var unpauseURL = regexp.MustCompile(`https://[^\s"]+/unpause\?jwt=[A-Za-z0-9._%-]+`)

type pauseRow struct {
	Account    string `json:"account"`
	Identifier string `json:"identifier"`
	Failures   int64  `json:"failures"`
	Paused     bool   `json:"paused"`
}

// TestPausedClientUnpauses: lego keeps failing http-01 for a name (it
// answers on a port the worker does not ask); once its failures are a day
// old (the rows aged, not slept) its next order is refused rateLimited
// with a link; the link opened in Chromium unpauses the account and lego's
// next order is admitted and issued. Paused again, the CLI lifts it; paused
// a third time, the panel's button does, audited. Both stores.
func TestPausedClientUnpauses(t *testing.T) {
	lego := requireTool(t, "lego", "apt-get install lego")
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dbURL := testdb.SQLite(t)
			if dialect == "postgres" {
				dbURL = testdb.Postgres(t)
			}
			c := startPausingCA(t, dbURL)
			ctx := browser(t, chromedp.Flag("ignore-certificate-errors", true)) // the frontend's test CA
			// A name per round: a valid authorization would be reused,
			// with no validation to fail.
			var name string
			l := harness.Lego{Bin: lego, Directory: c.BaseURL + "/directory", Root: c.Root, Email: "zombie@hallmark.test", Path: t.TempDir()}
			run := func(port int) (string, error) {
				return l.Run(context.Background(), "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", port), "run")
			}
			wrong := harness.FreePort(t)
			fail := func() string {
				t.Helper()
				out, err := run(wrong)
				if err == nil {
					t.Fatalf("lego answering on the wrong port got a certificate:\n%s", out)
				}
				return out
			}
			issue := func(why string) {
				t.Helper()
				if out, err := run(c.HTTPPort); err != nil {
					t.Fatalf("%s: lego run: %v\n%s", why, err, out)
				}
			}
			pauses := func(all bool) []pauseRow {
				t.Helper()
				args := []string{"--config", c.Config, "pauses", "list", "--json"}
				if all {
					args = append(args, "--all")
				}
				var rows []pauseRow
				out := c.Run("hallmark", args...)
				if err := json.Unmarshal([]byte(out), &rows); err != nil {
					t.Fatalf("hallmark pauses list: %v\n%s", err, out)
				}
				return rows
			}
			pauseAgain := func(round string) string {
				t.Helper()
				name = round + "-" + dialect + ".pause.test"
				fail()
				fail()
				if rows := pauses(true); len(rows) != 1 || rows[0].Identifier != "dns:"+name || rows[0].Failures != 2 || rows[0].Paused {
					t.Fatalf("after 2 failures within a day: %+v, want one run of 2, not paused", rows)
				}
				ageRuns(t, dbURL, 25*time.Hour)
				out := fail()
				if !strings.Contains(out, "rateLimited") || !strings.Contains(out, "is paused for dns:"+name) {
					t.Fatalf("the order after a day of failures was not refused as paused:\n%s", out)
				}
				return out
			}

			// 1. The subscriber unpauses through the link, in a browser.
			link := unpauseURL.FindString(pauseAgain("subscriber"))
			if link == "" {
				t.Fatal("the refusal carries no unpause link")
			}
			if err := chromedp.Do(ctx,
				chromedp.Navigate(link),
				chromedp.WaitVisible("#unpause"),
			); err != nil {
				t.Fatalf("opening the unpause link %s: %v", link, err)
			}
			if listed := text(t, ctx, "#paused"); !strings.Contains(listed, "dns:"+name) {
				t.Fatalf("the unpause page lists %q, want %s", listed, name)
			}
			if err := chromedp.Do(ctx, chromedp.Click("#unpause"), chromedp.WaitVisible("#done")); err != nil {
				t.Fatalf("unpausing: %v", err)
			}
			if done := text(t, ctx, "#done"); !strings.Contains(done, "Unpaused") {
				t.Fatalf("after the button: %q", done)
			}
			issue("after the subscriber unpaused")

			// 2. An operator lifts it with the CLI.
			pauseAgain("cli")
			rows := pauses(false)
			if len(rows) != 1 || !rows[0].Paused || rows[0].Identifier != "dns:"+name {
				t.Fatalf("hallmark pauses list: %+v, want the account paused for %s", rows, name)
			}
			if out := c.Run("hallmark", "--config", c.Config, "pauses", "lift", rows[0].Account); !strings.Contains(out, "cleared") {
				t.Fatalf("hallmark pauses lift: %s", out)
			}
			issue("after the CLI lifted the pause")

			// 3. An operator lifts it in the panel.
			pauseAgain("panel")
			if err := chromedp.Do(ctx,
				chromedp.Navigate(c.adminURL+"/"),
				chromedp.WaitVisible("#token"),
				chromedp.SendKeys("#user", "browser-test"),
				chromedp.SendKeys("#token", c.token),
				chromedp.Click("#sign-in"),
				chromedp.WaitVisible("#count-certs"),
			); err != nil {
				t.Fatalf("signing in: %v", err)
			}
			navigate(t, ctx, c.adminURL+"/pauses")
			if listed := text(t, ctx, "#pauses"); !strings.Contains(listed, "dns:"+name) {
				t.Fatalf("the pauses page lists %q, want %s", listed, name)
			}
			if err := chromedp.Do(ctx, chromedp.Click("#pauses button.lift"), chromedp.WaitVisible("#flash")); err != nil {
				t.Fatalf("lifting in the panel: %v", err)
			}
			if flash := text(t, ctx, "#flash"); !strings.Contains(flash, "Pause lifted") {
				t.Fatalf("after the panel's button: %q", flash)
			}
			navigate(t, ctx, c.adminURL+"/audit?kind=account.unpaused")
			audit := text(t, ctx, "#audit")
			for _, actor := range []string{"acme:" + rows[0].Account, "cli:", "admin:browser-test"} {
				if !strings.Contains(audit, actor) {
					t.Errorf("the audit log of unpauses lacks %s:\n%s", actor, audit)
				}
			}
			issue("after the panel lifted the pause")
		})
	}
}
