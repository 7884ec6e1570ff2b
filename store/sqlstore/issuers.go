package sqlstore

import (
	"context"
	"fmt"
	"sync"
)

// Issuer certificates live in settings under "issuer:<id>": the worker
// publishes the certificates of the issuers it mounts, and the frontend —
// which never sees the CA's files — serves them at the AIA caIssuers URL.
//
// Every issuer also has a row in issuers (migration 0009), which the
// operator's CRL views list (Issuers): a relay's or custom backend's issuer
// publishes no certificate and signs no CRL, and finding it among the
// certificates read every one of them.

func issuerSetting(id string) string { return "issuer:" + id }

// issuerRegisterSQL registers an issuer: $1 its id. A registered one is
// left as it is (no row is written).
const issuerRegisterSQL = `INSERT INTO issuers (id) VALUES ($1) ON CONFLICT DO NOTHING`

// certIssuerRegisterSQL registers the issuer of certificate $1 if the
// certificate row was written: a batch whose order swap moved nothing
// registers nothing either.
const certIssuerRegisterSQL = `INSERT INTO issuers (id) SELECT issuer_id FROM certificates WHERE serial = $1 ON CONFLICT DO NOTHING`

// registered is the set of issuers this store has registered in a
// committed transaction. Rows of issuers are never deleted, so an issuer
// in it needs no statement: a certificate of it costs issuance nothing
// more. A process registers each issuer once, in the transaction of its
// first certificate (OrderIssued).
type registered struct{ ids sync.Map }

func (r *registered) has(id string) bool {
	_, ok := r.ids.Load(id)
	return ok
}

// add records id once the transaction that registered it has committed.
func (r *registered) add(id string) { r.ids.Store(id, struct{}{}) }

func (s *Store) IssuerPublish(ctx context.Context, id string, der []byte) error {
	err := s.inTx(ctx, func(t *txn) error {
		var b batch
		b.exec("", `INSERT INTO settings (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, issuerSetting(id), der)
		b.exec("", issuerRegisterSQL, id)
		_, err := t.send(ctx, &b)
		return err
	})
	if err != nil {
		return fmt.Errorf("publishing issuer %s: %w", id, err)
	}
	s.issuers.add(id)
	return nil
}

func (s *Store) IssuerCert(ctx context.Context, id string) ([]byte, error) {
	var der []byte
	err := s.inTx(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT value FROM settings WHERE name = $1`, issuerSetting(id)).Scan(&der)
	})
	if err != nil {
		return nil, fmt.Errorf("reading issuer %s: %w", id, err)
	}
	return der, nil
}

// issuersSQL lists the issuers: one row each, read from issuers' primary
// key (TestFleetPlans), however many certificates they signed.
const issuersSQL = `SELECT id FROM issuers ORDER BY id`

func (s *Store) Issuers(ctx context.Context) ([]string, error) {
	var out []string
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			out = append(out, id)
			return nil
		}, issuersSQL)
	})
	if err != nil {
		return nil, fmt.Errorf("listing issuers: %w", err)
	}
	return out, nil
}
