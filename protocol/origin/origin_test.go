package origin

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"4bf92f3577b34da6a3ce929d0e0e4736", true},
		{"req_1.2-3", true},
		{strings.Repeat("a", MaxIDLength), true},
		{"", false},
		{strings.Repeat("a", MaxIDLength+1), false},
		{"a b", false},
		{"a\r\nX-Injected: 1", false},
		{"a=b", false},
		{"é", false},
	} {
		if got := ValidID(tc.id); got != tc.ok {
			t.Errorf("ValidID(%q) = %v, want %v", tc.id, got, tc.ok)
		}
	}
	a, b := NewID(), NewID()
	if !ValidID(a) || len(a) != 16 || a == b {
		t.Errorf("NewID gave %q and %q: want two different valid 16-character ids", a, b)
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"lego/4.25 (linux)", 100, "lego/4.25 (linux)"},
		{"a\x00b\nc\x7f", 100, "a?b?c?"},
		{"bad \xff utf8", 100, "bad ? utf8"},
		{"ééé", 5, "éé"}, // never half a character
		{"abc", 0, ""},
	} {
		got := Cut(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) || len(got) > tc.n {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	if got := Clean(strings.Repeat("x", 10*MaxText)); len(got) != MaxText {
		t.Errorf("Clean kept %d bytes, want %d", len(got), MaxText)
	}
}

// TestLogHandler: a line logged with a request's context carries its id,
// through With and WithGroup; one without a context carries none.
func TestLogHandler(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	log := Logger(slog.New(slog.NewTextHandler(&b, nil))).With("process", "frontend")
	ctx := NewContext(context.Background(), &Origin{RequestID: "rid-1"})
	log.InfoContext(ctx, "with")
	log.WithGroup("g").InfoContext(ctx, "grouped", "k", "v")
	log.Info("without")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "request_id=rid-1") || !strings.Contains(lines[1], "rid-1") ||
		strings.Contains(lines[2], "request_id") || !strings.Contains(lines[0], "process=frontend") {
		t.Fatalf("log:\n%s", b.String())
	}
	if Logger(log) == nil || LogHandler(log.Handler()) != log.Handler() {
		t.Error("wrapping twice adds a second request_id")
	}
}

func TestContext(t *testing.T) {
	t.Parallel()
	if FromContext(context.Background()) != nil || !Of(context.Background()).IsZero() {
		t.Fatal("a bare context has an origin")
	}
	o := &Origin{RequestID: "r"}
	ctx := NewContext(context.Background(), o)
	o.PTR = "host.example" // the access policy fills it in later
	if Of(ctx).PTR != "host.example" {
		t.Fatal("a field set after NewContext is not seen")
	}
}
