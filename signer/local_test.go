package signer

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
)

func TestInitLocalThenLoadLocal(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	rootPath, err := InitLocal(dir, CAOptions{Name: "Acme Corp", URLBase: "http://ca.test"})
	if err != nil {
		t.Fatal(err)
	}
	if rootPath != filepath.Join(dir, "root.pem") {
		t.Fatalf("root path %q", rootPath)
	}
	for name, mode := range map[string]os.FileMode{"root.key": 0o600, "intermediate.key": 0o600, "root.pem": 0o644, "intermediate.pem": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	iss, err := LoadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	iss.Logger = quietLog
	if iss.ID != hex.EncodeToString(iss.Cert.SubjectKeyId) || iss.ID == "" {
		t.Errorf("ID %q is not the hex of the SKI %x", iss.ID, iss.Cert.SubjectKeyId)
	}
	if iss.Cert.Subject.CommonName != "Acme Corp Intermediate CA" {
		t.Errorf("intermediate CN %q", iss.Cert.Subject.CommonName)
	}
	if len(iss.Chain) != 1 || !iss.Chain[0].Equal(iss.Cert) {
		t.Errorf("chain should be just the intermediate, got %d certs", len(iss.Chain))
	}
	roots, err := ReadCertificates(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	root := roots[0]
	if root.Subject.CommonName != "Acme Corp Root CA" || !root.IsCA {
		t.Errorf("root %q CA=%v", root.Subject.CommonName, root.IsCA)
	}
	if d := root.NotAfter.Sub(root.NotBefore); d < 10*365*24*time.Hour {
		t.Errorf("root valid for %v, want 10 years", d)
	}
	if d := iss.Cert.NotAfter.Sub(iss.Cert.NotBefore); d < 5*365*24*time.Hour || d > 6*365*24*time.Hour {
		t.Errorf("intermediate valid for %v, want 5 years", d)
	}
	if !iss.Cert.MaxPathLenZero || iss.Cert.MaxPathLen != 0 {
		t.Error("the intermediate must have pathLen 0")
	}

	// The loaded issuer issues, and the result chains to the written root.
	pool := x509.NewCertPool()
	pool.AddCert(root)
	out, err := iss.Issue(context.Background(), Request{
		Profile: profile.Default(), ProfileName: "default",
		Names:     []acme.Identifier{{Type: acme.IdentifierDNS, Value: "app.example.com"}},
		PublicKey: testKey(t, "p256").Public(),
		IssuerURL: "http://127.0.0.1:14000/issuer/" + iss.ID, CRLURL: "http://127.0.0.1:14000/crl/" + iss.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(out.DER)
	inter := x509.NewCertPool()
	inter.AddCert(iss.Chain[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: "app.example.com"}); err != nil {
		t.Fatalf("issued certificate does not verify to the new root: %v", err)
	}
}

func TestInitLocalRefusesToOverwrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
	}{
		{"a complete CA", func(t *testing.T, dir string) {
			if _, err := InitLocal(dir, CAOptions{Name: "First", URLBase: "http://ca.test"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"only a root key", func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "root.key"), []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tc.prepare(t, dir)
			before := snapshot(t, dir)
			_, err := InitLocal(dir, CAOptions{Name: "Second", URLBase: "http://ca.test"})
			if !errors.Is(err, ErrExists) {
				t.Fatalf("got %v, want ErrExists", err)
			}
			after := snapshot(t, dir)
			if len(before) != len(after) {
				t.Fatalf("files changed: %d before, %d after", len(before), len(after))
			}
			for name, data := range before {
				if !bytes.Equal(after[name], data) {
					t.Errorf("%s was rewritten", name)
				}
			}
		})
	}
}

func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = data
	}
	return out
}

func TestLoadLocalRefusesAMismatchedKey(t *testing.T) {
	t.Parallel()
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if _, err := InitLocal(d, CAOptions{Name: "X", URLBase: "http://ca.test"}); err != nil {
			t.Fatal(err)
		}
	}
	replace := func(name, from string) (restore func()) {
		t.Helper()
		own, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		// Remove first: the key file is written read-only.
		write := func(data []byte) {
			t.Helper()
			if err := os.Remove(filepath.Join(a, name)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(a, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(theirs)
		return func() { write(own) }
	}
	// Each mismatch alone, a's own files otherwise, so each refusal is
	// the one its check makes.
	restore := replace("intermediate.key", b)
	if _, err := LoadLocal(a); err == nil || !strings.Contains(err.Error(), "key") {
		t.Fatalf("LoadLocal with b's key next to a's intermediate: %v, want a refusal of the key", err)
	}
	restore()
	if _, err := LoadLocal(a); err != nil {
		t.Fatalf("LoadLocal of a's own files again: %v", err)
	}
	replace("root.pem", b)
	if _, err := LoadLocal(a); err == nil || !strings.Contains(err.Error(), "does not chain") {
		t.Fatalf("LoadLocal with b's root: %v, want an intermediate that does not chain to root.pem", err)
	}
}
