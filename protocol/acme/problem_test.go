package acme

import (
	"errors"
	"net/http"
	"testing"
)

// TestEveryProblemTypeHasAStatus keeps the status table complete: a type added
// without a status would render as 500.
func TestEveryProblemTypeHasAStatus(t *testing.T) {
	t.Parallel()
	all := []ProblemType{
		ProblemAccountDoesNotExist, ProblemAlreadyRevoked, ProblemBadCSR, ProblemBadNonce,
		ProblemBadPublicKey, ProblemBadRevocationReason, ProblemBadSignatureAlgorithm, ProblemCAA,
		ProblemCompound, ProblemConnection, ProblemDNS, ProblemExternalAccountRequired,
		ProblemIncorrectResponse, ProblemInvalidContact, ProblemMalformed, ProblemOrderNotReady,
		ProblemRateLimited, ProblemRejectedIdentifier, ProblemServerInternal, ProblemTLS,
		ProblemUnauthorized, ProblemUnsupportedContact, ProblemUnsupportedIdentifier,
		ProblemUserActionRequired, ProblemInvalidProfile, ProblemAlreadyReplaced,
	}
	for _, typ := range all {
		if _, ok := statusByType[typ]; !ok {
			t.Errorf("%s has no HTTP status", typ)
		}
	}
}

func TestAsError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		typ    ProblemType
		status int
	}{
		{"malformed", Malformed("bad %s", "thing"), ProblemMalformed, http.StatusBadRequest},
		{"wrapped", errors.Join(errors.New("ctx"), BadNonce("old")), ProblemBadNonce, http.StatusBadRequest},
		{"plain error hides text", errors.New("pq: secret table"), ProblemServerInternal, http.StatusInternalServerError},
		{"unavailable", Unavailable(0, "busy"), ProblemServerInternal, http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ae := AsError(tc.err)
			if ae.Problem.Type != tc.typ || ae.Problem.HTTPStatus() != tc.status {
				t.Fatalf("got %s/%d, want %s/%d", ae.Problem.Type, ae.Problem.HTTPStatus(), tc.typ, tc.status)
			}
			if tc.typ == ProblemServerInternal && ae.Problem.Detail == "pq: secret table" {
				t.Fatal("internal error text leaked into the problem detail")
			}
		})
	}
}
