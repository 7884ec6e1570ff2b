package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hallmark-ca/hallmark/store"
)

// IssuerStore is what the issuer actions write.
type IssuerStore interface {
	IssuerRotate(ctx context.Context, profile string, to []string, ev store.AuditEvent) ([]string, error)
	IssuerRetire(ctx context.Context, id string, ev store.AuditEvent) (store.IssuerState, error)
}

// RotateIssuers makes to the issuers profile signs with; the issuers no
// profile names any longer become retiring (returned). Audited as
// issuer.rotate. An unknown or inactive issuer is refused (ErrNotFound,
// ErrConflict) and nothing changes.
func RotateIssuers(ctx context.Context, st IssuerStore, profile string, to []string, actor string) ([]string, error) {
	if profile == "" || len(to) == 0 {
		return nil, errors.New("name a profile and at least one issuer")
	}
	ev := store.AuditEvent{Actor: actor, Action: "issuer.rotate", Subject: profile,
		Detail: "profile " + profile + " signs with " + strings.Join(to, ", ")}
	retiring, err := st.IssuerRotate(ctx, profile, to, ev)
	if err != nil {
		return nil, err
	}
	return retiring, nil
}

// RetireIssuer moves an issuer on: active (named by no profile) to
// retiring, retiring (no certificate outstanding) to retired. Audited as
// issuer.retire.
func RetireIssuer(ctx context.Context, st IssuerStore, id, actor string) (store.IssuerState, error) {
	if !store.Storable(id) || id == "" {
		return "", fmt.Errorf("%q is not an issuer id", id)
	}
	return st.IssuerRetire(ctx, id, store.AuditEvent{Actor: actor, Action: "issuer.retire", Subject: id})
}
