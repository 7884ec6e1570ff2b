package protocol

import (
	"errors"
	"net/http"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
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
			p := &post{ahead: tc.ahead}
			reads := 0
			read := func(*http.Request) (any, error) { reads++; return "read", nil }
			got, err := aheadOr[string](p, read)
			var ae *acme.Error
			if tc.wantType != "" && (!errors.As(err, &ae) || ae.Problem.Type != tc.wantType) {
				t.Fatalf("aheadOr error = %v, want a %s problem", err, tc.wantType)
			}
			if got != tc.want || (tc.wantType == "" && !errors.Is(err, tc.wantErr)) || reads != tc.wantReads {
				t.Fatalf("aheadOr = %q, %v after %d reads; want %q, %v after %d", got, err, reads, tc.want, tc.wantErr, tc.wantReads)
			}
			// A second read is always the handler's own.
			if got, err := aheadOr[string](p, read); got != "read" || err != nil {
				t.Fatalf("second aheadOr = %q, %v; want a fresh read", got, err)
			}
		})
	}
}
