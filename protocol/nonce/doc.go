// Package nonce owns ACME anti-replay nonces (RFC 8555 §6.5).
//
// A nonce is self-authenticating: an issue time, random bytes and an HMAC
// over both with a key every replica shares (stored once in the database).
// Issuing one writes nothing; any replica can reject a forged or expired
// nonce without a database read, and the database's consumed set makes a
// nonce good exactly once across all replicas. This package never keeps
// per-process nonce state: a nonce issued by one frontend must redeem at any
// other.
package nonce
