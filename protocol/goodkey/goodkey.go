// Package goodkey says whether a public key is fit to be certified: not
// one whose private half anyone can work out from the public half.
//
// The frontend checks a CSR's key here at finalize, so a client with a
// broken key generator learns it at once, as badCSR, with a sentence saying
// what is wrong. Without it the order was accepted, and the worker's lint
// (zlint's e_rsa_fermat_factorization and friends) refused the
// certificate later with serverInternal, which told the client nothing and
// alarmed the operator about a client's key. The lint still runs before
// every signature; this check is the one a client can act on.
//
// The checks are the CA/Browser Forum Baseline Requirements' (§6.1.6) and
// Boulder's (goodkey): for RSA an odd public exponent of at least 3, an odd
// modulus with no prime factor below 752, and prime factors not so close
// together that Fermat's method finds them in 100 rounds (as zlint's lint
// and Boulder do). Go's parser already refuses an ECDSA point that is not
// on its curve, and an Ed25519 key is 32 bytes of anything.
package goodkey

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"math/big"
)

// FermatRounds is how far Check searches for two close prime factors.
const FermatRounds = 100

// Check returns nil for a key fit to certify, or an error whose text says
// what is wrong with it, to go in a problem's detail.
func Check(pub any) error {
	if k, ok := pub.(*rsa.PublicKey); ok {
		return checkRSA(k)
	}
	return nil
}

func checkRSA(k *rsa.PublicKey) error {
	if k.N == nil || k.N.Sign() <= 0 {
		return errors.New("the RSA modulus is missing")
	}
	if k.E < 3 || k.E%2 == 0 {
		return fmt.Errorf("the RSA public exponent is %d; it must be odd and at least 3 (65537 is usual)", k.E)
	}
	if k.N.Bit(0) == 0 {
		return errors.New("the RSA modulus is even, so 2 is one of its factors")
	}
	if g := new(big.Int).GCD(nil, nil, k.N, smallPrimesProduct); g.Cmp(bigOne) != 0 {
		return fmt.Errorf("the RSA modulus has a small prime factor (%s); the key generator is broken", smallFactor(k.N))
	}
	if p, q, ok := fermat(k.N, FermatRounds); ok {
		return fmt.Errorf("the RSA modulus's two prime factors are so close together that they can be computed from it (they differ by %s); the key generator is broken", new(big.Int).Sub(q, p))
	}
	return nil
}

var bigOne = big.NewInt(1)

// smallPrimesProduct is the product of the primes below 752 (BR §6.1.6:
// "no factors smaller than 752"), so one GCD tests them all.
var smallPrimesProduct = func() *big.Int {
	prod := big.NewInt(1)
	for _, p := range smallPrimes {
		prod.Mul(prod, big.NewInt(p))
	}
	return prod
}()

var smallPrimes = func() []int64 {
	var ps []int64
	for n := int64(2); n < 752; n++ {
		if big.NewInt(n).ProbablyPrime(0) {
			ps = append(ps, n)
		}
	}
	return ps
}()

// smallFactor names the smallest prime below 752 that divides n.
func smallFactor(n *big.Int) string {
	m := new(big.Int)
	for _, p := range smallPrimes {
		if m.Mod(n, big.NewInt(p)).Sign() == 0 {
			return fmt.Sprint(p)
		}
	}
	return "?"
}

// fermat looks for n = p·q with p and q close, by Fermat's method: n =
// a² − b² = (a−b)(a+b), trying a = ⌈√n⌉, ⌈√n⌉+1, ... for rounds values and
// checking whether a² − n is a square. It returns the factors p < q when
// it finds them.
func fermat(n *big.Int, rounds int) (p, q *big.Int, ok bool) {
	a := new(big.Int).Sqrt(n)
	if new(big.Int).Mul(a, a).Cmp(n) == 0 {
		return a, a, true // a square: p = q
	}
	a.Add(a, bigOne)
	b2 := new(big.Int).Mul(a, a)
	b2.Sub(b2, n)
	b, r := new(big.Int), new(big.Int)
	for range rounds {
		if maybeSquare(r.Mod(b2, residueModulus).Uint64()) {
			b.Sqrt(b2)
			if new(big.Int).Mul(b, b).Cmp(b2) == 0 {
				return new(big.Int).Sub(a, b), new(big.Int).Add(a, b), true
			}
		}
		// (a+1)² − n = a² − n + 2a + 1
		b2.Add(b2, a).Add(b2, a).Add(b2, bigOne)
		a.Add(a, bigOne)
	}
	return nil, nil, false
}

// A square is a square modulo any m, so a number that is not a square
// modulo 64, 63, 65 or 11 is not one at all: these four rule out all but
// ~0.8% of non-squares for the price of one division by a word, before
// the square root, which costs a hundred times more (BenchmarkCheck: a
// good RSA-2048 key's 100 rounds took 0.34 ms with a square root each).
var residueModulus = big.NewInt(64 * 63 * 65 * 11)

// squaresMod holds, for each of those moduli, which residues squares have.
var squaresMod = func() []squareResidues {
	var t []squareResidues
	for _, m := range []uint64{64, 63, 65, 11} {
		r := squareResidues{m: m, is: make([]bool, m)}
		for i := range m {
			r.is[i*i%m] = true
		}
		t = append(t, r)
	}
	return t
}()

type squareResidues struct {
	m  uint64
	is []bool
}

// maybeSquare says whether x (a number's residue modulo residueModulus)
// could be a square's.
func maybeSquare(x uint64) bool {
	for _, r := range squaresMod {
		if !r.is[x%r.m] {
			return false
		}
	}
	return true
}
