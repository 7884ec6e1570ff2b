package protocol

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/store"
)

// relayToken serves the key authorization a relay backend's worker stored
// for an upstream http-01 token (RFC 8555 §8.3), to the upstream CA's
// validator. The frontend only reads it: the relay account's key, which
// makes it, stays in the worker.
func (s *Server) relayToken(w http.ResponseWriter, r *http.Request) error {
	token := mux.Vars(r)["token"]
	ka, err := s.st.relay.RelayTokenGet(r.Context(), token)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("http-01 token", token)
	}
	if err != nil {
		return s.storeErr(err, "reading an http-01 answer")
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(ka)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(ka))
	}
	return nil
}
