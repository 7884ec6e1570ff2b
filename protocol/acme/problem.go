package acme

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ProblemType is an RFC 8555 §6.7 error type URN.
type ProblemType string

// The error types of RFC 8555 §6.7, plus those of RFC 8657 and
// draft-ietf-acme-profiles that Hallmark emits.
const (
	ProblemAccountDoesNotExist     ProblemType = "urn:ietf:params:acme:error:accountDoesNotExist"
	ProblemAlreadyRevoked          ProblemType = "urn:ietf:params:acme:error:alreadyRevoked"
	ProblemBadCSR                  ProblemType = "urn:ietf:params:acme:error:badCSR"
	ProblemBadNonce                ProblemType = "urn:ietf:params:acme:error:badNonce"
	ProblemBadPublicKey            ProblemType = "urn:ietf:params:acme:error:badPublicKey"
	ProblemBadRevocationReason     ProblemType = "urn:ietf:params:acme:error:badRevocationReason"
	ProblemBadSignatureAlgorithm   ProblemType = "urn:ietf:params:acme:error:badSignatureAlgorithm"
	ProblemCAA                     ProblemType = "urn:ietf:params:acme:error:caa"
	ProblemCompound                ProblemType = "urn:ietf:params:acme:error:compound"
	ProblemConnection              ProblemType = "urn:ietf:params:acme:error:connection"
	ProblemDNS                     ProblemType = "urn:ietf:params:acme:error:dns"
	ProblemExternalAccountRequired ProblemType = "urn:ietf:params:acme:error:externalAccountRequired"
	ProblemIncorrectResponse       ProblemType = "urn:ietf:params:acme:error:incorrectResponse"
	ProblemInvalidContact          ProblemType = "urn:ietf:params:acme:error:invalidContact"
	ProblemMalformed               ProblemType = "urn:ietf:params:acme:error:malformed"
	ProblemOrderNotReady           ProblemType = "urn:ietf:params:acme:error:orderNotReady"
	ProblemRateLimited             ProblemType = "urn:ietf:params:acme:error:rateLimited"
	ProblemRejectedIdentifier      ProblemType = "urn:ietf:params:acme:error:rejectedIdentifier"
	ProblemServerInternal          ProblemType = "urn:ietf:params:acme:error:serverInternal"
	ProblemTLS                     ProblemType = "urn:ietf:params:acme:error:tls"
	ProblemUnauthorized            ProblemType = "urn:ietf:params:acme:error:unauthorized"
	ProblemUnsupportedContact      ProblemType = "urn:ietf:params:acme:error:unsupportedContact"
	ProblemUnsupportedIdentifier   ProblemType = "urn:ietf:params:acme:error:unsupportedIdentifier"
	ProblemUserActionRequired      ProblemType = "urn:ietf:params:acme:error:userActionRequired"
	ProblemInvalidProfile          ProblemType = "urn:ietf:params:acme:error:invalidProfile"
	// ProblemAlreadyReplaced: RFC 9773 §7.4, a newOrder "replaces" names a
	// certificate another order already replaces.
	ProblemAlreadyReplaced ProblemType = "urn:ietf:params:acme:error:alreadyReplaced"
)

// statusByType is the one table that maps a problem type to its HTTP status.
// A test asserts every ProblemType constant has an entry.
var statusByType = map[ProblemType]int{
	ProblemAccountDoesNotExist:     http.StatusBadRequest,
	ProblemAlreadyRevoked:          http.StatusBadRequest,
	ProblemBadCSR:                  http.StatusBadRequest,
	ProblemBadNonce:                http.StatusBadRequest,
	ProblemBadPublicKey:            http.StatusBadRequest,
	ProblemBadRevocationReason:     http.StatusBadRequest,
	ProblemBadSignatureAlgorithm:   http.StatusBadRequest,
	ProblemCAA:                     http.StatusForbidden,
	ProblemCompound:                http.StatusForbidden,
	ProblemConnection:              http.StatusBadRequest,
	ProblemDNS:                     http.StatusBadRequest,
	ProblemExternalAccountRequired: http.StatusUnauthorized,
	ProblemIncorrectResponse:       http.StatusBadRequest,
	ProblemInvalidContact:          http.StatusBadRequest,
	ProblemMalformed:               http.StatusBadRequest,
	ProblemOrderNotReady:           http.StatusForbidden,
	ProblemRateLimited:             http.StatusTooManyRequests,
	ProblemRejectedIdentifier:      http.StatusBadRequest,
	ProblemServerInternal:          http.StatusInternalServerError,
	ProblemTLS:                     http.StatusBadRequest,
	ProblemUnauthorized:            http.StatusForbidden,
	ProblemUnsupportedContact:      http.StatusBadRequest,
	ProblemUnsupportedIdentifier:   http.StatusBadRequest,
	ProblemUserActionRequired:      http.StatusForbidden,
	ProblemInvalidProfile:          http.StatusBadRequest,
	ProblemAlreadyReplaced:         http.StatusConflict,
}

// Problem is an RFC 7807 problem document as RFC 8555 §6.7 uses it.
type Problem struct {
	Type        ProblemType `json:"type"`
	Detail      string      `json:"detail,omitempty"`
	Status      int         `json:"status,omitempty"`
	Identifier  *Identifier `json:"identifier,omitempty"`
	Subproblems []Problem   `json:"subproblems,omitempty"`
	// Algorithms lists the "alg" values the server accepts; RFC 8555 §6.2
	// requires it on badSignatureAlgorithm so a client can pick another.
	Algorithms []string `json:"algorithms,omitempty"`
}

// HTTPStatus is the status a response carrying this problem uses.
func (p Problem) HTTPStatus() int {
	if p.Status != 0 {
		return p.Status
	}
	if s, ok := statusByType[p.Type]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is Hallmark's one error type for anything a client may see: a Problem
// that is safe to render, an optional Retry-After, and a private cause that is
// logged and never rendered.
type Error struct {
	Problem    Problem
	RetryAfter time.Duration
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Problem.Type, e.Problem.Detail, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Problem.Type, e.Problem.Detail)
}

func (e *Error) Unwrap() error { return e.Cause }

// AsError finds the *Error in err's chain. An error that carries none is
// reported as serverInternal with a fixed detail, so no internal text leaks.
func AsError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return &Error{Problem: Problem{Type: ProblemServerInternal, Detail: "the server hit an internal error; try again later"}, Cause: err}
}

// New builds an *Error of type t with a formatted detail sentence.
func New(t ProblemType, format string, args ...any) error {
	return &Error{Problem: Problem{Type: t, Detail: fmt.Sprintf(format, args...)}}
}

// Malformed is a request the server cannot parse or that breaks the protocol.
func Malformed(format string, args ...any) error { return New(ProblemMalformed, format, args...) }

// BadNonce is a missing, forged, expired or replayed nonce.
func BadNonce(format string, args ...any) error { return New(ProblemBadNonce, format, args...) }

// Unauthorized is a request the account is not allowed to make.
func Unauthorized(format string, args ...any) error {
	return New(ProblemUnauthorized, format, args...)
}

// Deactivated is a request signed by a deactivated (or revoked) account:
// unauthorized, but with 401 rather than the type's usual 403, as RFC 8555
// §7.3.6 requires, so a client can tell it apart from a request the account
// is merely not allowed to make.
func Deactivated(format string, args ...any) error {
	return &Error{Problem: Problem{Type: ProblemUnauthorized, Detail: fmt.Sprintf(format, args...), Status: http.StatusUnauthorized}}
}

// RateLimited carries the time until a slot opens.
func RateLimited(retryAfter time.Duration, format string, args ...any) error {
	return &Error{Problem: Problem{Type: ProblemRateLimited, Detail: fmt.Sprintf(format, args...)}, RetryAfter: retryAfter}
}

// Unavailable is a 503 with Retry-After: the server is busy or a backend did
// not answer in time; the client should try again.
func Unavailable(retryAfter time.Duration, format string, args ...any) error {
	return &Error{Problem: Problem{Type: ProblemServerInternal, Detail: fmt.Sprintf(format, args...), Status: http.StatusServiceUnavailable}, RetryAfter: retryAfter}
}

// Internal hides cause behind a fixed client-facing sentence.
func Internal(cause error) error {
	return &Error{Problem: Problem{Type: ProblemServerInternal, Detail: "the server hit an internal error; try again later"}, Cause: cause}
}

// Known reports whether t is one of the problem types above: a metric
// label takes only these, so its values stay bounded.
func (t ProblemType) Known() bool {
	_, ok := statusByType[t]
	return ok
}
