package ipam

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// client is what both kinds share: the base URL, the token, the custom
// field and how to ask.
type client struct {
	base, token, field string
	timeout            time.Duration
	http               *http.Client
}

// fetch GETs path below the base URL with the kind's authentication
// (auth) and returns the status and at most MaxResponse bytes of body.
// The lookup's deadline is the sooner of ctx's and the source's timeout.
func (c client) fetch(ctx context.Context, path string, auth func(http.Header)) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("building the request for %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	auth(req.Header)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.late(ctx, path, err) // else a *url.Error: the method, the URL and why
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return 0, nil, c.late(ctx, path, fmt.Errorf("reading the answer to %s: %w", c.base+path, err))
	}
	if len(body) > MaxResponse {
		return 0, nil, fmt.Errorf("%s answered more than %d bytes; is url the IPAM's API?", c.base+path, MaxResponse)
	}
	return resp.StatusCode, body, nil
}

// late says so when err is the lookup's deadline passing.
func (c client) late(ctx context.Context, path string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s did not answer within %s (timeout_ms, or the request's own deadline): %w", c.base+path, c.timeout, ctx.Err())
	}
	return err
}

// statusErr is an answer of status the lookup cannot use.
func statusErr(kind, path string, status int) error {
	hint := ""
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		hint = "; check token_file and the token's permissions"
	case status >= 300 && status < 400:
		hint = "; url must be the IPAM itself (redirects are not followed)"
	case status >= 500:
		hint = "; the IPAM is failing"
	}
	return fmt.Errorf("%s answered %d %s for %s%s", kind, status, http.StatusText(status), path, hint)
}

// fieldNames are the names a custom field's value lists: a list of
// strings, or one string of names separated by commas (or spaces). Any
// other value (an object, a number) lists none.
func fieldNames(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// names are raw as the trail compares them: lower case, no trailing dot,
// each once, in the order found; empty ones and any with a space or a
// control character are left out.
func names(raw []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, n := range raw {
		n = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(n)), ".")
		if n == "" || seen[n] || strings.IndexFunc(n, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}
