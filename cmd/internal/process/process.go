// Package process is what every Hallmark binary does as a process: its
// logger, its signals, its garbage collector target, serving an HTTP
// listener until shutdown and the optional runtime-profile listener. It is
// internal to cmd/, which the compiler enforces.
package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/hallmark-ca/hallmark/store/redact"
)

// DefaultGOGC is the garbage collector's target (GOGC, the heap's growth
// over the live heap between collections, in percent) that the frontend
// and the worker run with unless the operator sets GOGC. Go's default,
// 100, spent 8% of each process's CPU more at concurrency 32 for ~10-15 MiB
// less memory each: their live heaps are
// small, and a CA's frontend and worker are better off trading a little
// memory for the CPU. GOMEMLIMIT, if set, still bounds the heap.
const DefaultGOGC = 400

// TuneGC sets the garbage collector's target to DefaultGOGC unless the
// GOGC environment variable is set, which Go's runtime has then applied
// already. It returns the target in effect (-1: collection off).
func TuneGC() int {
	if os.Getenv("GOGC") != "" {
		cur := debug.SetGCPercent(100)
		debug.SetGCPercent(cur)
		return cur
	}
	debug.SetGCPercent(DefaultGOGC)
	return DefaultGOGC
}

// MaskedStderr is stderr with every secret masked (redact.Writer). It
// becomes the standard log package's output, and so slog's default
// handler's until Logger replaces it (hallmark-worker ca init logs so);
// a binary also gives it to urfave/cli, which prints a cli.Exit's message.
func MaskedStderr() io.Writer {
	w := redact.Writer(os.Stderr)
	log.SetOutput(w)
	return w
}

// Log is [log]: how a process writes its log lines.
type Log struct {
	// Format is "text" (slog's key=value, the default) or "json" (one
	// object a line, for a log pipeline).
	Format string `toml:"format"`
}

// Validate reports a format that is neither text nor json.
func (l Log) Validate() error {
	if l.Format != "" && l.Format != "text" && l.Format != "json" {
		return fmt.Errorf("log.format: must be \"text\" or \"json\", got %q", l.Format)
	}
	return nil
}

// handler writes to w at level in l's format, every secret masked
// (redact.ReplaceAttr) in either.
func (l Log) handler(w io.Writer, level slog.Leveler) slog.Handler {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: redact.ReplaceAttr}
	if l.Format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// Logger is the slog logger every binary uses: to stderr in cfg's format,
// with the process name on every line so interleaved logs (hallmark up)
// stay readable, and every secret masked (redact.ReplaceAttr).
func Logger(process string, cfg Log) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("HALLMARK_DEBUG") != "" {
		level = slog.LevelDebug
	}
	l := slog.New(cfg.handler(os.Stderr, level)).With("process", process)
	// Libraries that log through slog's default (the signer, River) get the
	// same format and process name.
	slog.SetDefault(l)
	return l
}

// QuietLogger is Logger at warning level and above, for libraries whose
// info lines are routine (River reports job counts every few seconds).
func QuietLogger(process string, cfg Log) *slog.Logger {
	return slog.New(cfg.handler(os.Stderr, slog.LevelWarn)).With("process", process)
}

// SignalContext is cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Hangups delivers a value on each SIGHUP, the operator's request to
// reload the configuration (systemctl reload), until ctx ends. Call it
// early: until it is called, a SIGHUP ends the process.
func Hangups(ctx context.Context) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	out := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				select {
				case out <- struct{}{}:
				default: // one reload pending covers any number of signals
				}
			}
		}
	}()
	return out
}

// Serve runs srv on ln until ctx ends, then shuts it down gracefully within
// grace. It serves TLS when tlsCert is set, or when srv.TLSConfig is
// (its GetCertificate choosing the certificate). The error is nil after a
// clean shutdown.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, tlsCert, tlsKey string, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() {
		var err error
		if tlsCert != "" || srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, tlsCert, tlsKey)
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return <-errc
}

// advisor is the database handle's review of its server's settings
// (store/open.DB.Advice).
type advisor interface {
	Advice(ctx context.Context) ([]string, error)
}

// LogAdvice logs, as warnings, what the database's settings put at risk: an
// operator reads it once at startup. A server that cannot be asked is no
// reason not to start.
func LogAdvice(ctx context.Context, db advisor, log *slog.Logger) {
	advice, err := db.Advice(ctx)
	if err != nil {
		log.Warn("could not review the database's settings", "err", err)
	}
	for _, a := range advice {
		log.Warn("database setting", "advice", a)
	}
}

// ServeProfiling serves Go's runtime profiles (net/http/pprof) on addr
// until ctx ends; empty addr does nothing. It is for measuring (see
// docs/performance.md), off by default, and the configuration keeps it on
// loopback: a profile shows memory contents and costs CPU to take.
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
