package operator

import (
	"context"
	"encoding/hex"
	"strings"

	"github.com/hallmark-ca/hallmark/store"
)

// KeyUnblocker is what removing a key's block needs of the store.
type KeyUnblocker interface {
	KeyUnblock(ctx context.Context, spkiHash []byte, ev store.AuditEvent) error
}

// UnblockKey removes the block of the key whose hash is spkiHash (a block
// recorded by mistake), so Hallmark may certify the key again, auditing
// store.ActionKeyUnblock with why in the same transaction. The
// certificates the block revoked stay revoked. store.ErrNotFound when the
// key is not blocked.
func UnblockKey(ctx context.Context, st KeyUnblocker, spkiHash []byte, why, actor string) error {
	detail := "block removed; the certificates it revoked stay revoked"
	if why = strings.TrimSpace(why); why != "" {
		detail += ": " + why
	}
	return st.KeyUnblock(ctx, spkiHash, store.AuditEvent{Actor: actor, Action: store.ActionKeyUnblock,
		Subject: hex.EncodeToString(spkiHash), Detail: detail})
}
