package protocol

import (
	"errors"
	"testing"
)

// TestAheadOr: a handler takes the read made ahead once, its error
// included, and reads for itself when there was none, when it was of
// another type, or when it already took it.
func TestAheadOr(t *testing.T) {
	errAhead := errors.New("read ahead failed")
	tests := []struct {
		name      string
		ahead     *aheadResult
		want      string
		wantErr   error
		wantReads int
	}{
		{"none", nil, "read", nil, 1},
		{"value", &aheadResult{v: "ahead"}, "ahead", nil, 0},
		{"error", &aheadResult{err: errAhead}, "", errAhead, 0},
		{"other type", &aheadResult{v: 42}, "read", nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &post{ahead: tc.ahead}
			reads := 0
			read := func() (string, error) { reads++; return "read", nil }
			got, err := aheadOr(p, read)
			if got != tc.want || !errors.Is(err, tc.wantErr) || reads != tc.wantReads {
				t.Fatalf("aheadOr = %q, %v after %d reads; want %q, %v after %d", got, err, reads, tc.want, tc.wantErr, tc.wantReads)
			}
			// A second read is always the handler's own.
			if got, err := aheadOr(p, read); got != "read" || err != nil {
				t.Fatalf("second aheadOr = %q, %v; want a fresh read", got, err)
			}
		})
	}
}
