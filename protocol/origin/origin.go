// Package origin is who asked: a request's id and its client (address,
// user agent, and the name the access policy found for the address), set
// by the frontend on the request's context, carried into the jobs the
// request queues (jobs: River metadata) and onto the issuance trail
// (store.AuditEvent). It is a leaf of the standard library: the frontend,
// the job queue, the store and the worker all link it.
package origin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Origin is the request a record or a job comes from. Every field is
// printable text that any store can hold (Clean).
type Origin struct {
	// RequestID names the request: the frontend's, or a trusted proxy's
	// (server.request_id_trusted_proxies). Every log line of the request
	// and of the jobs it queued carries it (request_id).
	RequestID string `json:"request_id,omitempty"`
	// ClientAddr is the address the request came from: the peer, unless
	// the access policy believed a trusted proxy's forwarded address.
	ClientAddr string `json:"client_addr,omitempty"`
	// PTR is the client's name as the access policy looked it up (reverse
	// DNS); empty when nothing looked it up.
	PTR string `json:"ptr,omitempty"`
	// UserAgent is the client's User-Agent header, cut to MaxText bytes.
	UserAgent string `json:"user_agent,omitempty"`
}

// IsZero reports an origin that names nothing (a job queued by an operator
// or by housekeeping).
func (o Origin) IsZero() bool { return o == Origin{} }

type ctxKey struct{}

// NewContext returns ctx carrying o. The pointer is the request's own: the
// access policy fills PTR on it before anything is recorded or queued.
func NewContext(ctx context.Context, o *Origin) context.Context {
	return context.WithValue(ctx, ctxKey{}, o)
}

// FromContext is the origin ctx carries, nil for none.
func FromContext(ctx context.Context) *Origin {
	o, _ := ctx.Value(ctxKey{}).(*Origin)
	return o
}

// Of is the origin ctx carries, the zero Origin for none.
func Of(ctx context.Context) Origin {
	if o := FromContext(ctx); o != nil {
		return *o
	}
	return Origin{}
}

// MaxIDLength bounds a request id accepted from a proxy.
const MaxIDLength = 64

// NewID is a fresh request id: 96 random bits, 16 characters of base64url.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ValidID reports whether id may be taken from a proxy's X-Request-Id:
// 1 to MaxIDLength characters of [A-Za-z0-9._-]. Anything else (a header
// injection, a log forgery, a megabyte) is replaced by a fresh id.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// MaxText bounds each text field taken from a client (the user agent).
const MaxText = 256

// Clean is s as the trail keeps a client's text: Cut to MaxText bytes.
func Clean(s string) string { return Cut(s, MaxText) }

// Cut is s as any store can hold it and any log shows it: valid UTF-8,
// printable (a control character or a NUL becomes '?'), at most n bytes
// cut at a character's boundary.
func Cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// LogHandler wraps h so that every record logged with a context carrying
// an origin (slog's ...Context methods) has its request_id attribute.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if o := FromContext(ctx); o != nil && o.RequestID != "" {
		r.AddAttrs(slog.String("request_id", o.RequestID))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}

func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{l.Handler.WithGroup(name)}
}

// Logger is log with LogHandler.
func Logger(log *slog.Logger) *slog.Logger {
	return slog.New(LogHandler(log.Handler()))
}
