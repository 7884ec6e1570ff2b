package goodkey

import (
	"crypto/rsa"
	"math/big"
	"testing"
)

// FuzzCheck: any modulus and exponent a hostile CSR or JWK could carry
// (the parsers bound their sizes; this does not) is judged without a panic,
// and factors Fermat's method reports multiply back to the modulus.
//
//	go test ./protocol/goodkey -run '^$' -fuzz '^FuzzCheck$' -fuzztime 60s
func FuzzCheck(f *testing.F) {
	f.Add([]byte{0x0f}, 65537)                                   // 15 = 3·5
	f.Add(big.NewInt(101*103).Bytes(), 3)                        // neighbouring primes
	f.Add(big.NewInt(1).Lsh(big.NewInt(1), 1024).Bytes(), 65537) // even
	f.Add([]byte{}, 65537)
	f.Fuzz(func(t *testing.T, n []byte, e int) {
		if len(n) > 1024 {
			return // 8192 bits: past what the parsers take
		}
		_ = Check(&rsa.PublicKey{N: new(big.Int).SetBytes(n), E: e})
		if len(n) == 0 {
			return
		}
		m := new(big.Int).SetBytes(n)
		if p, q, ok := fermat(m, FermatRounds); ok && new(big.Int).Mul(p, q).Cmp(m) != 0 {
			t.Fatalf("fermat(%v) = %v · %v", m, p, q)
		}
	})
}
