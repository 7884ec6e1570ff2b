package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testRelayTokens: a relay's http-01 answer is served until it is deleted
// or expires; a put again replaces it; an unknown token is ErrNotFound.
func testRelayTokens(t *testing.T, s store.Store, _ Extras) {
	ctx := t.Context()
	tok := "tok-" + time.Now().Format("150405.000000000")
	if _, err := s.RelayTokenGet(ctx, tok); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown token: %v, want ErrNotFound", err)
	}
	if err := s.RelayTokenPut(ctx, "up", tok, tok+".first", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.RelayTokenPut(ctx, "up", tok, tok+".thumb", time.Hour); err != nil {
		t.Fatalf("a put again: %v", err)
	}
	if ka, err := s.RelayTokenGet(ctx, tok); err != nil || ka != tok+".thumb" {
		t.Fatalf("the stored answer: %q, %v; want the latest put", ka, err)
	}
	if err := s.RelayTokenDelete(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RelayTokenGet(ctx, tok); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted token: %v, want ErrNotFound", err)
	}
	if err := s.RelayTokenDelete(ctx, tok); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	if err := s.RelayTokenPut(ctx, "up", tok+"-expired", "x", -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RelayTokenGet(ctx, tok+"-expired"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired token: %v, want ErrNotFound", err)
	}
}
