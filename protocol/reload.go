package protocol

import (
	"net/http"

	"github.com/hallmark-ca/hallmark/protocol/access"
)

// Reload builds the frontend of cfg and acc over the same store, caches,
// admission and metrics, and swaps it in whole: a request that arrived
// before runs to its end on the snapshot it started with, every later one
// on the new. On an error nothing changed. What New fixed for the process
// (server.max_concurrent_requests, the nonce lifetime, the metrics, the
// verdict hub) is kept; the caller refuses a reload that changes them.
func (s *Server) Reload(cfg Config, acc *access.Policy) error {
	next, err := s.core.snapshot(cfg, acc)
	if err != nil {
		return err
	}
	next.handler = next.routes()
	s.live.Store(next)
	return nil
}

// serveLive runs the request on the current snapshot.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request) {
	s.live.Load().handler.ServeHTTP(w, r)
}
