package config

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// ServeProfiling serves Go's runtime profiles (net/http/pprof) on addr
// until ctx ends; empty addr does nothing. It is for measuring (see
// docs/performance.md), off by default, and Validate keeps it on loopback:
// a profile shows memory contents and costs CPU to take.
func ServeProfiling(ctx context.Context, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for profiles on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := Serve(ctx, srv, ln, "", "", time.Second); err != nil {
			log.Error("profiling listener", "err", err)
		}
	}()
	log.Info("serving runtime profiles", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}

// validatePprof keeps the profiling listeners on loopback.
func (c Config) validatePprof(add func(key, format string, args ...any)) {
	for key, addr := range map[string]string{"server.pprof_listen": c.Server.PprofListen, "worker.pprof_listen": c.Worker.PprofListen} {
		if addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			add(key, "must be a loopback host:port such as 127.0.0.1:6060 (profiles expose process memory), got %q", addr)
		}
	}
}
