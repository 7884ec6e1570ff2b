package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
)

// testIssuerPublish: the frontend serves what a worker published, and a
// re-publish (a renewed intermediate under the same key) replaces it.
func testIssuerPublish(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	if _, err := s.IssuerCert(ctx, "abc"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("IssuerCert of an unpublished issuer: %v, want ErrNotFound", err)
	}
	for _, der := range [][]byte{{0x30, 0x01, 0x02}, {0x30, 0x03, 0x04, 0x05}} {
		if err := s.IssuerPublish(ctx, "abc", der); err != nil {
			t.Fatalf("IssuerPublish: %v", err)
		}
		got, err := s.IssuerCert(ctx, "abc")
		if err != nil || !bytes.Equal(got, der) {
			t.Fatalf("IssuerCert = %x, %v; want %x", got, err, der)
		}
	}
}
