package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/process"
)

// devConfig is the configuration `hallmark up` writes on first run. Paths
// are relative to the file. The worker resolves names through the CLI's
// own loopback DNS server (devDNS), which answers *.localhost with
// 127.0.0.1 and serves the zone file dev.zone, so http-01, tls-alpn-01 and
// dns-01 work with no network at all.
const devConfig = `# Written by 'hallmark up' for a local trial CA. Edit freely.
[database]
url = "sqlite:hallmark.db"

[server]
listen = "127.0.0.1:14000"
tls_cert = "frontend.pem"
tls_key = "frontend.key"
# The issuer domain name a CAA record names to let this CA issue (the
# directory's meta.caaIdentities; dev.zone has an example).
caa_identities = ["hallmark.localhost"]

[worker]
health_listen = "127.0.0.1:14001"

[challenge]
# The dev DNS server that 'hallmark up' runs: *.localhost -> 127.0.0.1, and
# the records of dev.zone (re-read when it changes).
resolvers = ["127.0.0.1:14053"]
# Where the worker looks for challenge responses (lego: --http.port :5002 --tls.port :5001).
http_port = 5002
https_port = 5001
tls_alpn_port = 5001

[ca]
dir = "ca"

[limits]
# What one account may ask of the CA (docs/operations.md, "Rate limits");
# 0 is unlimited. A 429 rateLimited answer says which limit and when to retry.
orders_per_account = 300                 # new orders per 3 hours
pending_authorizations_per_account = 300 # validations one account can have waiting
failed_validations_per_hour = 5          # per account and name
# certificates_per_domain = 50           # per registered domain per 7 days

[admin]
# The operator panel, on its own loopback listener; sign in with the token
# in admin.token (created on first run).
listen = "127.0.0.1:14090"
token_file = "admin.token"

[profiles.default]
# The built-in profile, plus dns-account-01 and dns-persist-01 for trying
# them out. dns-persist-01 is a standing authorization (a record plus the
# account's key is enough, for as long as the record stands): a production
# CA offers it only where it means to (docs/operations.md).
description = "90-day TLS server certificate"
backend = "local"
validity_hours = 2160
key_types = ["rsa2048", "rsa3072", "rsa4096", "p256", "p384"]
challenges = ["http-01", "dns-01", "tls-alpn-01", "dns-account-01", "dns-persist-01"]
identifier_types = ["dns", "ip"]
allow_wildcards = true
`

func upCommand() *cli.Command {
	return &cli.Command{
		Name:  "up",
		Usage: "start a local CA on loopback: SQLite, a dev CA created on first run, a frontend and a worker",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Value: "hallmark-data", Usage: "directory for the database, the CA and the configuration"},
			&cli.StringFlag{Name: "dns", Value: "127.0.0.1:14053", Usage: "address of the dev DNS server (must match challenge.resolvers)"},
		},
		Action: up,
	}
}

func up(c *cli.Context) error {
	cfgPath, cfg, err := upData(c.String("data"))
	if err != nil {
		return err
	}
	ctx, stop := process.SignalContext()
	defer stop()

	db, err := migrate(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	db.Close()
	workerBin, frontendBin, err := siblingBinaries()
	if err != nil {
		return err
	}
	// The CA is created by the worker binary: the CLI never touches keys.
	caInit := exec.CommandContext(ctx, workerBin, "--config", cfgPath, "ca", "init", "--cross-root",
		"--tls-cert", cfg.Server.TLSCert, "--tls-key", cfg.Server.TLSKey)
	caInit.Stdout, caInit.Stderr = os.Stdout, os.Stderr
	if err := caInit.Run(); err != nil {
		return fmt.Errorf("creating the dev CA: %w", err)
	}

	data := c.String("data")
	caaID := "hallmark.invalid"
	if len(cfg.Server.CAAIdentities) > 0 {
		caaID = cfg.Server.CAAIdentities[0]
	}
	if err := writeDevZone(data, caaID, c.String("dns")); err != nil {
		return err
	}
	zonePath := filepath.Join(data, devZoneFile)
	dns, err := startDevDNS(c.String("dns"), zonePath, os.Stderr)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range dns {
			_ = s.Shutdown()
		}
	}()

	procs := []*exec.Cmd{
		exec.Command(workerBin, "--config", cfgPath),
		exec.Command(frontendBin, "--config", cfgPath),
	}
	exited, err := startAll(procs)
	if err != nil {
		return err
	}
	root := filepath.Join(cfg.CA.Dir, "root.pem")
	if err := waitReady(ctx, cfg.Server.BaseURL+"/directory", root); err != nil {
		stopAll(procs)
		return err
	}
	fmt.Print(runningBanner(cfg, c.String("dns"), root, zonePath))
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping the frontend and the worker")
		stopAll(procs)
		return nil
	case err := <-exited:
		stopAll(procs)
		return err
	}
}

// upData makes the data directory (owner only: it holds the CA's keys and
// the database; an existing one others can reach is refused, not repaired
// by checkDataDir), writes the dev configuration and the admin token on
// first run, and loads the configuration.
func upData(data string) (string, config.Config, error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", config.Config{}, fmt.Errorf("creating %s: %w", data, err)
	}
	if err := checkDataDir(data); err != nil {
		return "", config.Config{}, err
	}
	cfgPath := filepath.Join(data, "hallmark.toml")
	if _, err := os.Stat(cfgPath); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(cfgPath, []byte(devConfig), 0o644); err != nil {
			return "", config.Config{}, err
		}
		fmt.Printf("wrote %s\n", cfgPath)
	}
	cfg, err := config.LoadWorker(cfgPath) // it starts a worker
	if err != nil {
		return "", cfg, cli.Exit(err.Error(), 2)
	}
	if err := checkKeyFiles(cfg, data); err != nil {
		return "", cfg, err
	}
	return cfgPath, cfg, writeAdminToken(cfg.Admin.TokenFile)
}

// writeAdminToken writes a random operator token to tf, owner only,
// unless tf is empty or already exists.
func writeAdminToken(tf string) error {
	if tf == "" {
		return nil
	}
	if _, err := os.Stat(tf); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	if err := os.WriteFile(tf, []byte(hex.EncodeToString(tok)+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing the admin token %s: %w", tf, err)
	}
	return nil
}

// siblingBinaries are hallmark-worker and hallmark-frontend beside this
// binary.
func siblingBinaries() (worker, frontend string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", "", err
	}
	bin := filepath.Dir(self)
	worker, frontend = filepath.Join(bin, "hallmark-worker"), filepath.Join(bin, "hallmark-frontend")
	for _, b := range []string{worker, frontend} {
		if _, err := os.Stat(b); err != nil {
			return "", "", fmt.Errorf("%s is missing: build it with `make build` (it must sit beside this binary)", b)
		}
	}
	return worker, frontend, nil
}

// startAll starts procs, each in its own process group (Ctrl-C reaches us,
// and we stop the children in order rather than racing the terminal's
// signal); the channel says when the first exits. On a failure to start it
// stops those it started.
func startAll(procs []*exec.Cmd) (<-chan error, error) {
	exited := make(chan error, len(procs))
	for _, p := range procs {
		p.Stdout, p.Stderr = os.Stdout, os.Stderr
		p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := p.Start(); err != nil {
			stopAll(procs)
			return nil, fmt.Errorf("starting %s: %w", p.Path, err)
		}
		go func(p *exec.Cmd) { exited <- fmt.Errorf("%s exited: %v", filepath.Base(p.Path), p.Wait()) }(p)
	}
	return exited, nil
}

// runningBanner is what up prints once the CA answers: where every
// endpoint is, and a first lego command.
func runningBanner(cfg config.Config, dns, root, zone string) string {
	var b strings.Builder
	line := func(what, format string, args ...any) {
		fmt.Fprintf(&b, "  %-18s %s\n", what+":", fmt.Sprintf(format, args...))
	}
	b.WriteString("\nHallmark is running.\n")
	line("ACME directory", "%s/directory", cfg.Server.BaseURL)
	line("root certificate", "%s", root)
	line("names that work", "anything under .localhost (the dev DNS on %s answers 127.0.0.1)", dns)
	line("dev DNS zone", "%s (served beside them, read again when it changes)", zone)
	if cfg.CA.URLBase != "" {
		line("CRLs, issuer certs", "%s/crl/<issuer>[/<shard>], %s/issuer/<issuer>", cfg.CA.URLBase, cfg.CA.URLBase)
	}
	if cfg.Admin.Listen != "" {
		line("admin panel", "http://%s/ (token in %s)", cfg.Admin.Listen, cfg.Admin.TokenFile)
	}
	line("frontend health", "%s/healthz, /readyz, /metrics", cfg.Server.BaseURL)
	if cfg.Worker.HealthListen != "" {
		line("worker health", "http://%s/healthz, /readyz, /metrics", cfg.Worker.HealthListen)
	} else {
		line("worker health", "off (worker.health_listen is empty)")
	}
	fmt.Fprintf(&b, `
  lego --server %s/directory --email you@example.com --accept-tos \
       --domains test.localhost --http --http.port :%d run
  (with LEGO_CA_CERTIFICATES=%s)

Press Ctrl-C to stop.
`, cfg.Server.BaseURL, cfg.Challenge.HTTPPort, root)
	return b.String()
}

// stopAll sends SIGTERM to every running child and waits up to 15s before
// killing what is left.
func stopAll(procs []*exec.Cmd) {
	for _, p := range procs {
		if p.Process != nil && p.ProcessState == nil {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range procs {
		for p.Process != nil && p.ProcessState == nil && time.Now().Before(deadline) {
			if err := p.Process.Signal(syscall.Signal(0)); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if p.Process != nil {
			_ = p.Process.Kill()
		}
	}
}

// waitReady polls the directory over TLS, trusting only the dev root.
func waitReady(ctx context.Context, url, rootPath string) error {
	pem, err := os.ReadFile(rootPath)
	if err != nil {
		return fmt.Errorf("reading the dev root %s: %w", rootPath, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the frontend did not answer %s within 30s: %v", url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
