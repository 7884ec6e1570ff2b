// Package goodkeytest makes the broken keys goodkey refuses, for tests:
// RSA keys whose two primes are neighbours, which crypto/rsa will neither
// generate nor sign with, though other implementations (OpenSSL, a
// token, a broken firmware generator) do both.
package goodkeytest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"io"
	"math/big"
)

// NeighbourPrimes returns a signer of bits-bit RSA key whose primes are
// consecutive primes: a broken generator that searches upwards from one
// random starting point for both makes these, and Fermat's method factors
// them from the public key at once. It signs RSASSA-PKCS1-v1_5 SHA-256
// signatures (what x509.CreateCertificateRequest asks of an RSA key).
func NeighbourPrimes(bits int) (crypto.Signer, error) {
	for {
		p, q, err := Neighbours(bits / 2)
		if err != nil {
			return nil, err
		}
		if k := FromPrimes(p, q); k != nil && k.N.BitLen() == bits {
			return rawSigner{k}, nil
		}
	}
}

// Neighbours returns a random prime p of bits bits and the next prime q.
func Neighbours(bits int) (p, q *big.Int, err error) {
	p, err = rand.Prime(rand.Reader, bits)
	if err != nil {
		return nil, nil, err
	}
	q = new(big.Int).Add(p, big.NewInt(2))
	for !q.ProbablyPrime(20) {
		q.Add(q, big.NewInt(2))
	}
	return p, q, nil
}

// FromPrimes is the RSA key of primes p and q with exponent 65537, or nil
// when 65537 has no inverse modulo (p−1)(q−1) or p = q.
func FromPrimes(p, q *big.Int) *rsa.PrivateKey {
	if p.Cmp(q) == 0 {
		return nil
	}
	one := big.NewInt(1)
	phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
	d := new(big.Int).ModInverse(big.NewInt(65537), phi)
	if d == nil {
		return nil
	}
	k := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: new(big.Int).Mul(p, q), E: 65537}, D: d, Primes: []*big.Int{p, q}}
	k.Precompute()
	return k
}

// rawSigner signs by modular exponentiation alone, for a key crypto/rsa
// refuses to sign with.
type rawSigner struct{ k *rsa.PrivateKey }

func (r rawSigner) Public() crypto.PublicKey { return &r.k.PublicKey }

// sha256DigestInfo is the DER prefix of a SHA-256 DigestInfo (RFC 8017
// §9.2, note 1).
var sha256DigestInfo = []byte{0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20}

func (r rawSigner) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts.HashFunc() != crypto.SHA256 || len(digest) != sha256.Size {
		return nil, fmt.Errorf("goodkeytest signs SHA-256 digests only, not %v", opts.HashFunc())
	}
	if _, ok := opts.(*rsa.PSSOptions); ok {
		return nil, fmt.Errorf("goodkeytest signs PKCS #1 v1.5 only")
	}
	// EMSA-PKCS1-v1_5: 00 01 FF...FF 00 DigestInfo.
	t := append(append([]byte{}, sha256DigestInfo...), digest...)
	size := (r.k.N.BitLen() + 7) / 8
	em := make([]byte, size)
	em[1] = 1
	for i := 2; i < size-len(t)-1; i++ {
		em[i] = 0xff
	}
	copy(em[size-len(t):], t)
	s := new(big.Int).Exp(new(big.Int).SetBytes(em), r.k.D, r.k.N)
	return s.FillBytes(make([]byte, size)), nil
}
