package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/pkcs11"
	"github.com/hallmark-ca/hallmark/signer/relay"
	"github.com/hallmark-ca/hallmark/worker"
)

// tokens are the PKCS#11 issuers one mount opened, by backend name:
// profiles naming the same [backends.<name>] share one login and session
// pool. A reload opens its own set and closes the one it replaced once
// that one's jobs have ended.
type tokens struct {
	sync.Mutex
	m    map[string]*signer.Issuer
	open []*pkcs11.Token
}

func newTokens() *tokens { return &tokens{m: map[string]*signer.Issuer{}} }

// mount opens the token of [backends.<name>] once.
func (ts *tokens) mount(cfg config.Config, name string) (*signer.Issuer, error) {
	ts.Lock()
	defer ts.Unlock()
	if iss, ok := ts.m[name]; ok {
		return iss, nil
	}
	b := cfg.Backends[name]
	pc, err := pkcs11.ConfigFor(b.PKCS11, b.Timeout())
	if err != nil {
		return nil, fmt.Errorf("backends.%s: %w", name, err)
	}
	iss, tok, err := pkcs11.LoadIssuer(pc, b.Cert)
	if err != nil {
		return nil, fmt.Errorf("backends.%s (run `hallmark-worker ca init --pkcs11 %s` to create the key and certificate): %w", name, name, err)
	}
	ts.m[name] = iss
	ts.open = append(ts.open, tok)
	return iss, nil
}

// close closes every token opened.
func (ts *tokens) close(log *slog.Logger) {
	ts.Lock()
	defer ts.Unlock()
	for _, t := range ts.open {
		if err := t.Close(); err != nil {
			log.Warn("closing a PKCS#11 token", "err", err)
		}
	}
	ts.open = nil
}

// relayStore is what a relay keeps in the store: its journal of upstream
// orders and its http-01 answers.
type relayStore interface {
	relay.Journal
	relay.Tokens
}

// mountBackends builds the relay and custom backends of the profiles this
// worker serves (worker.profiles, or all when empty). Profiles naming the
// same [backends.<name>] share one backend. Neither contacts anything here.
// A relay journals its upstream orders in journal (the store), so that a
// retry on any worker resumes them.
func mountBackends(cfg config.Config, log *slog.Logger, journal relayStore) (map[string]worker.Backend, error) {
	if cfg.Worker.Perspective != "" {
		return map[string]worker.Backend{}, nil // a perspective signs nothing
	}
	serves := servesProfile(cfg)
	out := map[string]worker.Backend{}
	byName := map[string]worker.Backend{}
	for name, p := range cfg.Profiles {
		if !serves(name) || (p.Backend != "relay" && p.Backend != "custom") {
			continue
		}
		if b, ok := byName[p.Signer]; ok {
			out[name] = b
			continue
		}
		bc := cfg.Backends[p.Signer]
		var b worker.Backend
		var err error
		switch p.Backend {
		case "relay":
			b, err = relay.New(relay.Config{Relay: bc.Relay, Name: p.Signer, Timeout: bc.Timeout(), Logger: log, Journal: journal, Tokens: journal})
		case "custom":
			b, err = custom.New(custom.Config{Custom: bc.Custom, Name: p.Signer, Timeout: bc.Timeout(), Logger: log})
		}
		if err != nil {
			return nil, fmt.Errorf("profiles.%s: %w", name, err)
		}
		byName[p.Signer], out[name] = b, b
	}
	return out, nil
}

// initPKCS11 generates the key of [backends.<name>] on its token and writes
// the intermediate certificate the local root signs for it (ca.dir/root.pem
// and root.key, made by `ca init`).
func initPKCS11(c *cli.Context, cfg config.Config, name string) error {
	b, ok := cfg.Backends[name]
	if !ok || b.Type != "pkcs11" {
		return cli.Exit(fmt.Sprintf("--pkcs11 %s: there is no [backends.%s] of type pkcs11", name, name), 2)
	}
	pc, err := pkcs11.ConfigFor(b.PKCS11, b.Timeout())
	if err != nil {
		return fmt.Errorf("backends.%s: %w", name, err)
	}
	cert, err := pkcs11.Init(pc, c.String("key-type"), c.String("name")+" HSM Intermediate CA "+name,
		filepath.Join(cfg.CA.Dir, signer.RootCertFile), filepath.Join(cfg.CA.Dir, signer.RootKeyFile), b.Cert, caOptions(cfg, ""))
	if errors.Is(err, signer.ErrExists) {
		fmt.Printf("PKCS#11 backend %s is already initialised (left unchanged): %v\n", name, err)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("generated a %s key on PKCS#11 %s and wrote its certificate %s (issuer %x)\n", c.String("key-type"), pc, b.Cert, cert.SubjectKeyId)
	// The root's key signed: its CRL is signed again too.
	_, err = signer.SignRootCRL(cfg.CA.Dir, signer.RootCertFile, signer.RootKeyFile, cfg.CA.URLBase)
	return err
}

// backendsReady puts the mounted backends' health in front of /readyz: a
// token that went away or an upstream CA that does not answer makes the
// worker not ready, while its jobs are retried.
func backendsReady(w *worker.Live, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := w.Current().BackendsReady(ctx); err != nil {
			http.Error(rw, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(rw, r)
	})
}
