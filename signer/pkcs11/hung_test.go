package pkcs11_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/pkcs11"
)

// stallingModule builds testdata/stall.c: SoftHSM2 (a copy of the module,
// so its state is its own) whose C_Sign does not return while the file it
// returns exists. It needs a C compiler, as cgo does.
func stallingModule(t *testing.T) (module, stallFile string) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatalf("no C compiler (cc), which building crypto11 needs too: %v", err)
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "libsofthsm2-copy.so")
	raw, err := os.ReadFile(hsm.module)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	headers, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/miekg/pkcs11").Output()
	if err != nil {
		t.Fatalf("finding the PKCS#11 headers (github.com/miekg/pkcs11): %v", err)
	}
	module, stallFile = filepath.Join(dir, "stall.so"), filepath.Join(dir, "stall-now")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-I", strings.TrimSpace(string(headers)),
		`-DREAL_MODULE="`+real+`"`, `-DSTALL_FILE="`+stallFile+`"`, "testdata/stall.c", "-o", module, "-ldl").CombinedOutput()
	if err != nil {
		t.Fatalf("building the stalling module: %v\n%s", err, out)
	}
	return module, stallFile
}

// TestHungToken: a token that stops answering a signature (a network HSM
// cut off mid-call; here SoftHSM2 behind a module whose C_Sign stalls)
// fails the signature with signer.ErrUnavailable after the sign timeout,
// so its job is retried instead of held for good; Ready reports the token
// hung while the call is out; once the token answers again, it signs.
// Before, Sign waited on the token for as long as it took.
func TestHungToken(t *testing.T) {
	tokenMu.RLock()
	defer tokenMu.RUnlock()
	c := newCA(t, "hung", "p256")
	module, stall := stallingModule(t)
	cfg := c.cfg
	cfg.Module, cfg.SignTimeout = module, 300*time.Millisecond
	tok, err := pkcs11.Open(cfg, c.iss.Signer.Public())
	if err != nil {
		t.Fatalf("opening the key through the stalling module: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(stall); _ = tok.Close() })
	digest := sha256.Sum256([]byte("tbs"))
	if _, err := tok.Sign(rand.Reader, digest[:], crypto.SHA256); err != nil {
		t.Fatalf("signing before the token stalls: %v", err)
	}

	if err := os.WriteFile(stall, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	returned := make(chan error, 1)
	go func() {
		_, err := tok.Sign(rand.Reader, digest[:], crypto.SHA256)
		returned <- err
	}()
	select {
	case err := <-returned:
		if !errors.Is(err, signer.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("signing on a hung token: %v, want signer.ErrUnavailable saying it did not answer", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a signature on a hung token had not returned after 30s (the sign timeout is 300ms)")
	}
	if err := tok.Ready(context.Background()); !errors.Is(err, signer.ErrUnavailable) || !strings.Contains(err.Error(), "hung") {
		t.Fatalf("Ready with a signature hung on the token: %v, want it reported hung", err)
	}

	if err := os.Remove(stall); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); tok.Ready(context.Background()) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Ready 30s after the token answers again: %v", tok.Ready(context.Background()))
		}
	}
	sig, err := tok.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatalf("signing after the token answers again: %v", err)
	}
	if pub, ok := c.iss.Signer.Public().(*ecdsa.PublicKey); !ok || !ecdsa.VerifyASN1(pub, digest[:], sig) {
		t.Fatal("the signature after the token came back does not verify")
	}
}
