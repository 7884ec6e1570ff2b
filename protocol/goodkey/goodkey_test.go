package goodkey

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"math/big"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/goodkey/goodkeytest"
)

func closePrimes(t testing.TB, bits int) (p, q *big.Int) {
	t.Helper()
	p, q, err := goodkeytest.Neighbours(bits)
	if err != nil {
		t.Fatal(err)
	}
	return p, q
}

func TestCheck(t *testing.T) {
	good, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ed, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, q := closePrimes(t, 1024)
	rsaKey := func(n *big.Int, e int) *rsa.PublicKey { return &rsa.PublicKey{N: n, E: e} }
	for _, c := range []struct {
		name string
		pub  any
		want string // in the error; "" for a fit key
	}{
		{"RSA-2048 from crypto/rsa", &good.PublicKey, ""},
		{"exponent 3", rsaKey(good.N, 3), ""},
		{"ECDSA P-256", &ec.PublicKey, ""},
		{"Ed25519", ed, ""},
		{"even exponent", rsaKey(good.N, 65536), "must be odd and at least 3"},
		{"exponent 1", rsaKey(good.N, 1), "must be odd and at least 3"},
		{"even modulus", rsaKey(new(big.Int).Lsh(good.N, 1), 65537), "modulus is even"},
		{"a factor of 751", rsaKey(new(big.Int).Mul(good.N, big.NewInt(751)), 65537), "small prime factor (751)"},
		{"a factor of 3", rsaKey(new(big.Int).Mul(good.N, big.NewInt(3)), 65537), "small prime factor (3)"},
		{"close prime factors", rsaKey(new(big.Int).Mul(p, q), 65537), "so close together"},
		{"a square", rsaKey(new(big.Int).Mul(p, p), 65537), "so close together"},
		{"no modulus", rsaKey(nil, 65537), "missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.pub)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused a fit key: %v", err)
			case c.want != "" && err == nil:
				t.Errorf("accepted it, want an error with %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q, want %q in it", err, c.want)
			}
		})
	}
}

// TestFermatFindsTheFactors: what the search finds is the key's factors,
// and primes further apart than its rounds reach are not reported.
func TestFermatFindsTheFactors(t *testing.T) {
	p, q := closePrimes(t, 512)
	fp, fq, ok := fermat(new(big.Int).Mul(p, q), FermatRounds)
	if !ok || fp.Cmp(p) != 0 || fq.Cmp(q) != 0 {
		t.Errorf("fermat found %v, %v, %v; want %v, %v", fp, fq, ok, p, q)
	}
	good, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := fermat(good.N, FermatRounds); ok {
		t.Error("fermat factored a key crypto/rsa generated")
	}
}

// BenchmarkCheck: what finalize pays for the check on a good key.
func BenchmarkCheck(b *testing.B) {
	for _, bits := range []int{2048, 4096} {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("rsa"+big.NewInt(int64(bits)).String(), func(b *testing.B) {
			for b.Loop() {
				if err := Check(&k.PublicKey); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMaybeSquare: the residue filter passes every square (it may only
// save square roots, never miss a factor).
func TestMaybeSquare(t *testing.T) {
	r := new(big.Int)
	for i := 0; i < 20000; i++ {
		x, err := rand.Int(rand.Reader, new(big.Int).Lsh(bigOne, 1100))
		if err != nil {
			t.Fatal(err)
		}
		sq := new(big.Int).Mul(x, x)
		if !maybeSquare(r.Mod(sq, residueModulus).Uint64()) {
			t.Fatalf("%v² ruled out as a square", x)
		}
	}
}
