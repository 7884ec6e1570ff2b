package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/redact"
)

// A root's CRL (signer.SignRootCRL) is a file in ca.dir, signed where the
// root's key is; the frontend serves CRLs from the database only, so each
// command that signs one stores it there, and every worker start stores the
// files' too (one signed while the database was unreachable).

// caOptions are [ca]'s settings for the CA certificates the ca commands make.
func caOptions(cfg config.Config, name string) signer.CAOptions {
	return signer.CAOptions{Name: name, Country: cfg.CA.Country, URLBase: cfg.CA.URLBase}
}

// rootCRLStore is what publishing a root's CRL writes.
type rootCRLStore interface {
	CRLStore(ctx context.Context, c store.CRL) error
}

// publishRootCRLs stores the CRL files of ca.dir's roots as shard 0 of
// each root's CRLs, served at ca.url_base/crl/<root id>. One whose number
// is stored already (or a newer one) is left: ok.
func publishRootCRLs(ctx context.Context, st rootCRLStore, dir string) ([]*signer.RootCRL, error) {
	crls, err := signer.RootCRLs(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the roots' CRLs in %s: %w", dir, err)
	}
	for _, c := range crls {
		err := st.CRLStore(ctx, store.CRL{IssuerID: c.IssuerID, Number: c.Number, ThisUpdate: c.ThisUpdate, NextUpdate: c.NextUpdate, DER: c.DER})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("publishing the CRL of root %s: %w", c.IssuerID, err)
		}
	}
	return crls, nil
}

// publishRootCRLsNow opens the database and publishes the roots' CRLs,
// for a ca command that has just signed them; when the database is not
// there yet, the worker's next start publishes them.
func publishRootCRLsNow(ctx context.Context, cfg config.Config) {
	db, err := open.Open(ctx, cfg.Database.URL, 2)
	if err != nil {
		// The error may name the database URL: printed masked, as main's.
		fmt.Printf("the roots' CRLs are in %s; not published yet (%s): hallmark-worker publishes them when it starts\n", cfg.CA.Dir, redact.Text(err.Error()))
		return
	}
	defer db.Close()
	crls, err := publishRootCRLs(ctx, db.Store, cfg.CA.Dir)
	if err != nil {
		fmt.Printf("the roots' CRLs are in %s; not published (%s): hallmark-worker publishes them when it starts\n", cfg.CA.Dir, redact.Text(err.Error()))
		return
	}
	for _, c := range crls {
		fmt.Printf("root CRL published at %s/crl/%s, valid until %s: renew it before then with `hallmark-worker ca root-crl`\n",
			cfg.CA.URLBase, c.IssuerID, c.NextUpdate.Format(time.DateOnly))
	}
}

// publishRootCRLsAtStart is the worker start's publication: a failure is
// logged, not fatal (the root's CRL is not what the worker signs).
func publishRootCRLsAtStart(ctx context.Context, cfg config.Config, st rootCRLStore, log *slog.Logger) {
	crls, err := publishRootCRLs(ctx, st, cfg.CA.Dir)
	if err != nil {
		log.Warn("the roots' CRLs in ca.dir are not published", "err", err)
		return
	}
	for _, c := range crls {
		if until := time.Until(c.NextUpdate); until < 30*24*time.Hour {
			log.Warn("a root's CRL expires soon: renew it with `hallmark-worker ca root-crl` where the root's key is", "root", c.IssuerID, "next_update", c.NextUpdate)
		}
	}
}

// caRootCRL signs each root's CRL again (`hallmark-worker ca root-crl`):
// what the operator runs before the nextUpdate of the last one.
func caRootCRL(c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	crls, err := signer.RefreshRootCRLs(cfg.CA.Dir, cfg.CA.URLBase)
	if err != nil {
		return err
	}
	for _, r := range crls {
		fmt.Printf("signed the CRL of root %s, number %d, valid until %s\n", r.IssuerID, r.Number, r.NextUpdate.Format(time.RFC3339))
	}
	publishRootCRLsNow(c.Context, cfg)
	return nil
}

var descRootCRLNext = prometheus.NewDesc("hallmark_root_crl_next_update_timestamp_seconds",
	"nextUpdate of a root's newest stored CRL, as a Unix time; absent before the first. Only `hallmark-worker ca root-crl`, where the root's key is, renews it.",
	[]string{"root"}, nil)

// rootCRLCollector exports the nextUpdate of ca.dir's roots' CRLs, read
// from the store at scrape time: the alert that asks for `ca root-crl` in
// time (HallmarkRootCRLExpiring) reads it.
type rootCRLCollector struct {
	st interface {
		CRLShardLatest(ctx context.Context, issuerID string, shard int) (*store.CRL, error)
	}
	ids []string
}

func (c rootCRLCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descRootCRLNext }

func (c rootCRLCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, id := range c.ids {
		if crl, err := c.st.CRLShardLatest(ctx, id, 0); err == nil {
			ch <- prometheus.MustNewConstMetric(descRootCRLNext, prometheus.GaugeValue, float64(crl.NextUpdate.Unix()), id)
		}
	}
}

// rootIDs are the ids of the roots in dir (root.pem, root-x2.pem) that
// are there.
func rootIDs(dir string) []string {
	var ids []string
	for _, f := range signer.RootCertFiles() {
		if certs, err := signer.ReadCertificates(filepath.Join(dir, f)); err == nil {
			ids = append(ids, hex.EncodeToString(certs[0].SubjectKeyId))
		}
	}
	return ids
}
