package protocol

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/store"
)

// TestAheadOr: a handler takes the read made ahead once, its error
// included, reads for itself when there was none or when it already took
// it, and a read of the wrong type is a server error, not a guess.
func TestAheadOr(t *testing.T) {
	errAhead := errors.New("read ahead failed")
	tests := []struct {
		name      string
		ahead     *aheadResult
		want      string
		wantErr   error
		wantType  acme.ProblemType
		wantReads int
	}{
		{"none", nil, "read", nil, "", 1},
		{"value", &aheadResult{v: "ahead"}, "ahead", nil, "", 0},
		{"error", &aheadResult{err: errAhead}, "", errAhead, "", 0},
		{"other type", &aheadResult{v: 42}, "", nil, acme.ProblemServerInternal, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &post{r: httptest.NewRequest(http.MethodPost, "/acme/order/o1", nil), ahead: tc.ahead}
			reads := 0
			ahead := func(*http.Request, *jws.Message, string) store.Lookup {
				return store.Lookup{Kind: store.LookupOrder, ID: "o1"}
			}
			read := func(_ context.Context, l store.Lookup) (any, error) {
				if l.Kind != store.LookupOrder || l.ID != "o1" {
					t.Errorf("read %+v, not the route's lookup", l)
				}
				reads++
				return "read", nil
			}
			got, err := aheadOr[string](p, ahead, read)
			var ae *acme.Error
			if tc.wantType != "" && (!errors.As(err, &ae) || ae.Problem.Type != tc.wantType) {
				t.Fatalf("aheadOr error = %v, want a %s problem", err, tc.wantType)
			}
			if got != tc.want || (tc.wantType == "" && !errors.Is(err, tc.wantErr)) || reads != tc.wantReads {
				t.Fatalf("aheadOr = %q, %v after %d reads; want %q, %v after %d", got, err, reads, tc.want, tc.wantErr, tc.wantReads)
			}
			// A second read is always the handler's own.
			if got, err := aheadOr[string](p, ahead, read); got != "read" || err != nil {
				t.Fatalf("second aheadOr = %q, %v; want a fresh read", got, err)
			}
		})
	}
}

// TestAheadID: only an ID this server could have minted rides in the
// nonce's shared batch; anything PostgreSQL could refuse as text is read
// on its own, where it fails only its own request.
func TestAheadID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"mQ3_xZ-4k2v9HcG1pLr0aw", true},                   // randomID: 16 bytes base64url
		{"04c1f2a3b4c5d6e7f8091a2b3c4d5e6f70819203", true}, // a hex serial
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"abc\x00def", false},
		{"abc\xffdef", false},
		{"abc/def", false},
		{"abc def", false},
		{"abc%00", false},
		{"é", false},
	}
	for _, tc := range tests {
		if got := aheadID(tc.id); got != tc.want {
			t.Errorf("aheadID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}
