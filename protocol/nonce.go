package protocol

import "net/http"

// newNonce answers HEAD with 200 and GET with 204 (RFC 8555 §7.2); the
// Replay-Nonce and Cache-Control: no-store headers are set by instrument, as
// on every ACME response.
func (s *Server) newNonce(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
