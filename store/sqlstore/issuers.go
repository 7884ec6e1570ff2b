package sqlstore

import (
	"context"
	"fmt"
)

// Issuer certificates live in settings under "issuer:<id>": the worker
// publishes the certificates of the issuers it mounts, and the frontend —
// which never sees the CA's files — serves them at the AIA caIssuers URL.

func issuerSetting(id string) string { return "issuer:" + id }

func (s *Store) IssuerPublish(ctx context.Context, id string, der []byte) error {
	err := s.inTx(ctx, func(t *txn) error {
		_, err := t.exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, issuerSetting(id), der)
		return err
	})
	if err != nil {
		return fmt.Errorf("publishing issuer %s: %w", id, err)
	}
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
