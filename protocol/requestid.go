package protocol

import (
	"net/http"
	"net/netip"

	"github.com/hallmark-ca/hallmark/protocol/origin"
)

// headerRequestID names a request, in a proxy's request and in every
// response.
const headerRequestID = "X-Request-Id"

// withOrigin wraps every handler of the frontend's listeners: who asked
// rides the request's context (its log lines, the jobs it queues, the
// trail), and its id is in the answer.
func (s *Server) withOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := s.requestOrigin(r)
		w.Header().Set(headerRequestID, o.RequestID)
		h.ServeHTTP(w, r.WithContext(origin.NewContext(r.Context(), o)))
	})
}

// requestOrigin is who sent r: the request's id, the peer's address and
// the user agent. The id is the one a proxy sent in X-Request-Id when the
// peer is one of server.request_id_trusted_proxies and it sent one
// well-formed id (origin.ValidID); otherwise a fresh one, so no client
// can choose the id its requests are logged and recorded under.
func (s *Server) requestOrigin(r *http.Request) *origin.Origin {
	peer := peerAddr(r)
	o := &origin.Origin{UserAgent: origin.Clean(r.UserAgent())}
	if peer.IsValid() {
		o.ClientAddr = peer.String()
	}
	if ids := r.Header.Values(headerRequestID); len(ids) == 1 && origin.ValidID(ids[0]) && s.trustedProxy(peer) {
		o.RequestID = ids[0]
	} else {
		o.RequestID = origin.NewID()
	}
	return o
}

// trustedProxy reports whether peer may name its requests' ids.
func (s *Server) trustedProxy(peer netip.Addr) bool {
	for _, p := range s.idProxies {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// peerAddr is the address of r's peer, the zero Addr if r has none (a
// test's request).
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
