package redact

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const pw = "SuperSecret123"

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://postgres:" + pw + "@127.0.0.1:5432/hallmark?sslmode=disable",
			"postgres://postgres:xxxxx@127.0.0.1:5432/hallmark?sslmode=disable"},
		{"postgresql://u:" + pw + "@db.example:5432/h", "postgresql://u:xxxxx@db.example:5432/h"},
		// The password in the query, under either name pgx reads, even
		// percent-encoded; sslkey is a path and stays.
		{"postgres://u@h/db?password=" + pw + "&sslmode=require", "postgres://u@h/db?password=xxxxx&sslmode=require"},
		{"postgres://u@h/db?sslkey=/etc/k.pem&sslpassword=" + pw, "postgres://u@h/db?sslkey=/etc/k.pem&sslpassword=xxxxx"},
		{"postgres://u@h/db?pass%77ord=" + pw, "postgres://u@h/db?pass%77ord=xxxxx"},
		// Characters net/url escapes differently survive: only the secret changes.
		{"postgres://u:p%40ss" + pw + "@h/db", "postgres://u:xxxxx@h/db"},
		// Keyword/value DSNs, quoted with libpq's escapes or not.
		{"host=127.0.0.1 user=postgres password=" + pw + " dbname=h", "host=127.0.0.1 user=postgres password=xxxxx dbname=h"},
		{"host=h password='a \\' " + pw + "' sslpassword=" + pw, "host=h password=xxxxx sslpassword=xxxxx"},
		{"password = " + pw, "password = xxxxx"},
		// A URL that does not parse is still masked.
		{"postgres://u:" + pw + "@h:port/%zz", "postgres://u:xxxxx@h:port/%zz"},
		// Nothing to hide.
		{"postgres://postgres@127.0.0.1:5432/h?sslmode=disable", "postgres://postgres@127.0.0.1:5432/h?sslmode=disable"},
		{"sqlite:/var/lib/hallmark/hallmark.db", "sqlite:/var/lib/hallmark/hallmark.db"},
		{"sqlite:hallmark.db", "sqlite:hallmark.db"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBX\n-----END EC PRIVATE KEY-----"
	for _, tc := range []struct{ in, want string }{
		{`migrating postgres://postgres:` + pw + `@127.0.0.1:5432/h: connection refused`,
			`migrating postgres://postgres:xxxxx@127.0.0.1:5432/h: connection refused`},
		{`database.url: must be postgres://... or sqlite:<path>, got "mysql://root:` + pw + `@db"`,
			`database.url: must be postgres://... or sqlite:<path>, got "mysql://root:xxxxx@db"`},
		// Two URLs on a line, one without a password.
		{"a http://h/x b postgres://u:" + pw + "@h c", "a http://h/x b postgres://u:xxxxx@h c"},
		{"cannot parse `host=h password=" + pw + "`", "cannot parse `host=h password=xxxxx`"},
		{"PGPASSWORD=" + pw + " psql", "PGPASSWORD=xxxxx psql"},
		{"pin=1234 token=abc", "pin=xxxxx token=xxxxx"},
		{"key: " + key + " end", "key: -----BEGIN EC PRIVATE KEY----- xxxxx -----END EC PRIVATE KEY----- end"},
		{fmt.Sprintf("%q", key), `"-----BEGIN EC PRIVATE KEY----- xxxxx -----END EC PRIVATE KEY-----"`},
		{"cut -----BEGIN PRIVATE KEY-----\nMIIE", "cut -----BEGIN PRIVATE KEY----- xxxxx -----END PRIVATE KEY-----"},
		// What is not a secret stays.
		{"token_label=hallmark pin_env=HSM_PIN listen 127.0.0.1:14000", "token_label=hallmark pin_env=HSM_PIN listen 127.0.0.1:14000"},
		{"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
		{"mailto:ops@example.com https://ca.example/acme/acct/1", "mailto:ops@example.com https://ca.example/acme/acct/1"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// TestAdd: a registered value is masked wherever it stands on its own,
// without the shape that gives a URL's password away; not inside a longer
// run of letters and digits, and a short one is not registered.
func TestAdd(t *testing.T) {
	Add("correct-horse-battery", "1234", "20252026")
	AddURL("postgres://u:url-password-9@h/db?sslpassword=query-password-7")
	AddURL("postgres://postgres:postgres@h/db")
	for _, tc := range []struct{ in, want string }{
		{"the PIN correct-horse-battery was refused", "the PIN xxxxx was refused"},
		{"auth failed with url-password-9 and query-password-7", "auth failed with xxxxx and xxxxx"},
		{"pin 20252026, twice:20252026", "pin xxxxx, twice:xxxxx"},
		{"20252026", "xxxxx"},
		// A serial, a port, a user name: not the secrets.
		{"serial=0a20252026ff port 51234", "serial=0a20252026ff port 51234"},
		{"dialect postgres: schema version 12", "dialect postgres: schema version 12"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestReplaceAttr: the message and every kind of attribute a Hallmark
// process logs pass through Text.
func TestReplaceAttr(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})).
		With("db", "postgres://u:"+pw+"@h/db")
	type conf struct{ URL string }
	log.WithGroup("g").Error("opening postgres://u:"+pw+"@h/db failed",
		"err", errors.New("dial postgres://u:"+pw+"@h: refused"),
		"cfg", conf{URL: "postgres://u:" + pw + "@h"},
		"n", 7)
	out := buf.String()
	if strings.Contains(out, pw) {
		t.Fatalf("the password reached the log:\n%s", out)
	}
	if strings.Count(out, Mask) != 4 || !strings.Contains(out, "g.n=7") {
		t.Fatalf("want 4 masks and the other attributes as they were:\n%s", out)
	}
}

// TestWriter: each write is masked whole, and reports the caller's length.
func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := Writer(&buf)
	line := "2026/01/02 INFO connecting url=postgres://u:" + pw + "@h/db\n"
	n, err := w.Write([]byte(line))
	if err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(line))
	}
	if got := buf.String(); got != "2026/01/02 INFO connecting url=postgres://u:xxxxx@h/db\n" {
		t.Fatalf("wrote %q", got)
	}
}
