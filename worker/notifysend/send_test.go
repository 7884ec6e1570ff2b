package notifysend_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/worker/notifysend"
)

func job(dest string) jobs.Job[jobs.NotifySendArgs] {
	return jobs.Job[jobs.NotifySendArgs]{Attempt: 1, MaxAttempts: jobs.NotifyMaxAttempts, Args: jobs.NotifySendArgs{
		Event: notify.CertificateIssued, Destination: dest, Key: "0a", Subject: "0a", Names: []string{"a.test"}}}
}

func sender(t *testing.T, c notify.Config) *notifysend.Sender {
	t.Helper()
	c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := notifysend.New(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWebhookStatusDecidesRetry: 2xx is delivered, 429 and 5xx are
// retried, any other 4xx (and a redirect, not followed) is a refusal that
// cancels the job.
func TestWebhookStatusDecidesRetry(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string // "done", "retry", "refused"
	}{
		{200, "done"}, {204, "done"}, {429, "retry"}, {500, "retry"}, {503, "retry"},
		{400, "refused"}, {404, "refused"}, {410, "refused"}, {302, "refused"},
	} {
		var body, key string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 4096)
			n, _ := r.Body.Read(b)
			body, key = string(b[:n]), r.Header.Get("Idempotency-Key")
			if tc.status == 302 {
				w.Header().Set("Location", "/elsewhere")
			}
			w.WriteHeader(tc.status)
		}))
		s := sender(t, notify.Config{Destinations: []notify.Destination{{Name: "slack", Kind: notify.KindWebhook, URL: srv.URL,
			Headers: map[string]string{"Authorization": "Bearer x"}, Body: `{"text": {{json .Text}}}`}}})
		err := s.Handle(context.Background(), job("slack"))
		srv.Close()
		got := "refused"
		switch {
		case err == nil:
			got = "done"
		case jobs.IsCouldNotRun(err):
			got = "retry"
		}
		if got != tc.want {
			t.Errorf("status %d: %s (%v), want %s", tc.status, got, err, tc.want)
		}
		if !strings.HasPrefix(body, `{"text": "Certificate 0a issued for a.test`) || key != "certificate_issued/0a/slack" {
			t.Errorf("status %d: body %q, Idempotency-Key %q", tc.status, body, key)
		}
	}
}

// TestWebhookDownIsRetried: a receiver that refuses connections is
// retried, and the error names no URL (a Slack URL holds its token).
func TestWebhookDownIsRetried(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	s := sender(t, notify.Config{Destinations: []notify.Destination{{Name: "hook", Kind: notify.KindWebhook, URL: "http://" + addr + "/T0K3N"}}})
	err := s.Handle(context.Background(), job("hook"))
	if !jobs.IsCouldNotRun(err) || strings.Contains(err.Error(), "T0K3N") {
		t.Fatalf("error %v: want a retry that does not quote the URL", err)
	}
}

// TestTemplateDirOverrides: <event>.tmpl in template_dir replaces the
// built-in body; a file naming no event is a configuration error.
func TestTemplateDirOverrides(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "certificate_issued.tmpl"), []byte("ISSUED {{.Subject}} {{join .Names \"+\"}}"), 0o600)
	out := filepath.Join(t.TempDir(), "out")
	s := sender(t, notify.Config{TemplateDir: dir, Destinations: []notify.Destination{{Name: "prog", Kind: notify.KindProgram,
		Command: []string{"/bin/sh", "-c", `cat > "$1"; env | grep -v '^PWD=\|^SHLVL=\|^_=' >> "$1" || true`, "sh", out}}}})
	t.Setenv("NOT_PASSED", "secret")
	if err := s.Handle(context.Background(), job("prog")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), `"text":"ISSUED 0a a.test"`) || strings.Contains(string(b), "NOT_PASSED") {
		t.Errorf("the program got %s: want the overriding template's text and an empty environment", b)
	}
	os.WriteFile(filepath.Join(dir, "certificate_isued.tmpl"), []byte("x"), 0o600)
	err := notify.Config{TemplateDir: dir}.Validate()
	if err == nil || !strings.Contains(err.Error(), "notify.template_dir: certificate_isued.tmpl names no event") {
		t.Errorf("Validate = %v, want the misnamed template named", err)
	}
}

// TestUnknownEventNamesItsKey: an event name that is none is a
// configuration error naming the key.
func TestUnknownEventNamesItsKey(t *testing.T) {
	c := notify.Config{Destinations: []notify.Destination{{Name: "hook", Kind: notify.KindWebhook, URL: "https://x.test/",
		Events: []string{notify.CertificateIssued, "cert_issued"}}}}
	c.Defaults()
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `notify.destinations[0].events[1]: "cert_issued" is no event`) {
		t.Fatalf("Validate = %v, want events[1] named", err)
	}
}
