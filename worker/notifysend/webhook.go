package notifysend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/template"
	"time"

	"github.com/hallmark-ca/hallmark/jobs/notify"
)

// webhook POSTs (or PUTs, PATCHes) the event to a URL: its own body
// template's text, or the event as JSON. 2xx is delivered; 429, 5xx and
// network errors are retried; any other status is a refusal.
type webhook struct {
	d      notify.Destination
	body   *template.Template
	client *http.Client
}

func newWebhook(d notify.Destination, key string) (*webhook, error) {
	w := &webhook{d: d, client: &http.Client{
		Timeout: time.Duration(d.TimeoutMS) * time.Millisecond,
		// The operator named this URL; no proxy from the environment, and
		// a redirect is the receiver's answer, not followed.
		Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if d.Body != "" {
		tp, err := notify.Inline(d.Name, d.Body)
		if err != nil {
			return nil, fmt.Errorf("%s.body: %w", key, err)
		}
		w.body = tp
	}
	return w, nil
}

func (w *webhook) send(ctx context.Context, m notify.Message) error {
	body, err := render(w.body, m, func() (string, error) {
		b, err := json.Marshal(m)
		return string(b), err
	})
	if err != nil {
		return &permanent{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, w.d.Method, w.d.URL, strings.NewReader(body))
	if err != nil {
		return &permanent{err: err}
	}
	req.Header.Set("Content-Type", w.d.ContentType)
	req.Header.Set("User-Agent", "hallmark-notify")
	req.Header.Set("Idempotency-Key", m.Key+"/"+m.Destination)
	req.Header.Set("X-Hallmark-Event", m.Event)
	for k, v := range w.d.Headers {
		req.Header.Set(k, v)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		// *url.Error quotes the URL, which may hold a token (Slack's do).
		return fmt.Errorf("the webhook could not be reached: %w", errors.Unwrap(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusTooManyRequests || code >= 500:
		return fmt.Errorf("the webhook answered %s: %q", resp.Status, snippet)
	default:
		return refused("the webhook answered %s: %q", resp.Status, snippet)
	}
}
