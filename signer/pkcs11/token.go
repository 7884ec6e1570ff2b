package pkcs11

import (
	"bytes"
	"context"
	"crypto"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThalesGroup/crypto11"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store/redact"
)

// Config selects a key on a token.
type Config struct {
	Module      string // path of the PKCS#11 module (.so)
	TokenLabel  string // the token's label, or
	Slot        *int   // its slot number
	PIN         string // the user PIN; never logged
	KeyLabel    string // the key pair's CKA_LABEL, or
	KeyID       []byte // its CKA_ID
	MaxSessions int    // session pool size (at least 2: one stays logged in)
	// SignTimeout bounds one signature, and the wait for a session to make
	// it in; 0 is DefaultSignTimeout. PKCS#11 calls take no deadline, and a
	// token that stops answering (a network HSM cut off mid-call) would
	// otherwise hold the job, and the session, for good.
	SignTimeout time.Duration
}

// DefaultSignTimeout is Config.SignTimeout's default: far above what a
// signature takes on any token (SoftHSM2: well under a millisecond), far
// below what a client polling an order waits.
const DefaultSignTimeout = 10 * time.Second

// ConfigFor turns a [backends.<name>] of type pkcs11 into the token's
// Config, reading the PIN from its environment variable or file and
// registering it with redact; signTimeout is the backend's timeout_ms.
func ConfigFor(s signerconf.PKCS11, signTimeout time.Duration) (Config, error) {
	pin, err := readPIN(s)
	if err != nil {
		return Config{}, err
	}
	redact.Add(pin)
	var id []byte
	if s.KeyID != "" {
		if id, err = hex.DecodeString(s.KeyID); err != nil {
			return Config{}, fmt.Errorf("key_id: %w", err)
		}
	}
	return Config{Module: s.Module, TokenLabel: s.TokenLabel, Slot: s.Slot, PIN: pin,
		KeyLabel: s.KeyLabel, KeyID: id, MaxSessions: s.MaxSessions, SignTimeout: signTimeout}, nil
}

// readPIN reads the PIN from the environment variable or the file (a
// trailing newline is dropped). It is never part of the configuration file,
// so it is never printed with it.
func readPIN(s signerconf.PKCS11) (string, error) {
	switch {
	case s.PINEnv != "":
		v, ok := os.LookupEnv(s.PINEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("pin_env: the environment variable %s is not set", s.PINEnv)
		}
		return v, nil
	case s.PINFile != "":
		data, err := os.ReadFile(s.PINFile)
		if err != nil {
			return "", fmt.Errorf("pin_file: %w", err)
		}
		pin := strings.TrimRight(string(data), "\r\n")
		if pin == "" {
			return "", fmt.Errorf("pin_file: %s is empty", s.PINFile)
		}
		return pin, nil
	}
	return "", fmt.Errorf("neither pin_env nor pin_file is set")
}

func (c Config) signTimeout() time.Duration {
	if c.SignTimeout <= 0 {
		return DefaultSignTimeout
	}
	return c.SignTimeout
}

func (c Config) String() string {
	sel := "token " + c.TokenLabel
	if c.Slot != nil {
		sel = fmt.Sprintf("slot %d", *c.Slot)
	}
	key := "key " + c.KeyLabel
	if c.KeyLabel == "" {
		key = fmt.Sprintf("key id %x", c.KeyID)
	}
	return fmt.Sprintf("%s, %s, %s", c.Module, sel, key)
}

func (c Config) crypto11() *crypto11.Config {
	max := c.MaxSessions
	if max < 2 {
		max = 2
	}
	// A call that finds every session held by calls the token never
	// answered fails, as they did, instead of waiting behind them.
	return &crypto11.Config{Path: c.Module, TokenLabel: c.TokenLabel, SlotNumber: c.Slot, Pin: c.PIN, MaxSessions: max, PoolWaitTimeout: c.signTimeout()}
}

// Token is a crypto.Signer whose key lives on a PKCS#11 token. It opens the
// module again after the token went away; its public key is fixed when it
// is opened, so a different key under the same label is refused rather
// than used.
type Token struct {
	cfg Config
	pub crypto.PublicKey

	// grp serialises opening and closing the module with every other Token
	// on it (module.go): a reconnect must not reuse a module instance that
	// a close is about to finalize.
	grp *group
	mu  sync.Mutex
	ctx *crypto11.Context // nil while the token is away
	key crypto.Signer

	// hung counts signatures that outlived the sign timeout and have not
	// returned yet: each holds a session and a goroutine until the token
	// answers. Ready reports the token hung while any is outstanding.
	hung atomic.Int64
}

// Open opens the module, logs in and finds the key pair: the one whose
// public key is want (the issuer certificate's), or, with want nil, the one
// key pair the label and id name.
func Open(cfg Config, want crypto.PublicKey) (*Token, error) {
	t := &Token{cfg: cfg, grp: groupFor(cfg.Module)}
	t.grp.mu.Lock()
	defer t.grp.mu.Unlock()
	ctx, key, err := connect(cfg, want)
	if err != nil {
		return nil, err
	}
	t.ctx, t.key, t.pub = ctx, key, key.Public()
	t.grp.members[t] = struct{}{}
	return t, nil
}

func connect(cfg Config, want crypto.PublicKey) (*crypto11.Context, crypto.Signer, error) {
	ctx, err := crypto11.Configure(cfg.crypto11())
	if err != nil {
		return nil, nil, fmt.Errorf("opening PKCS#11 %s: %w", cfg, err)
	}
	key, err := findKey(ctx, cfg, want)
	if err != nil {
		_ = ctx.Close()
		return nil, nil, fmt.Errorf("finding the key on PKCS#11 %s: %w", cfg, err)
	}
	return ctx, key, nil
}

// findKey picks the key pair cfg names. A label (or id) may name several
// key pairs, an old key kept beside its replacement for one; crypto11's
// FindKeyPair returns whichever the token lists first, so the choice is
// made here by public key, and refused when it cannot be made.
func findKey(ctx *crypto11.Context, cfg Config, want crypto.PublicKey) (crypto11.Signer, error) {
	var label []byte
	if cfg.KeyLabel != "" {
		label = []byte(cfg.KeyLabel)
	}
	keys, err := ctx.FindKeyPairs(cfg.KeyID, label)
	if err != nil {
		return nil, err
	}
	if want == nil {
		switch len(keys) {
		case 0:
			return nil, errors.New("no such key pair")
		case 1:
			return keys[0], nil
		default:
			return nil, fmt.Errorf("%d key pairs match; give each a label (or key_id) of its own", len(keys))
		}
	}
	for _, k := range keys {
		if samePublic(k.Public(), want) {
			return k, nil
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no such key pair")
	}
	return nil, fmt.Errorf("none of the %d key pair(s) it names holds the issuer certificate's public key", len(keys))
}

// Public is the key's public half, read when the token was opened.
func (t *Token) Public() crypto.PublicKey { return t.pub }

// Sign signs digest on the token. Any failure is the token's, not the
// request's (the digest is always well-formed), so it wraps
// signer.ErrUnavailable, and the module is closed so the next call opens it
// afresh.
//
// A signature the token has not made within the sign timeout is given up
// (signer.ErrUnavailable, so the job is retried, on another worker or
// once the token answers again): PKCS#11 calls take no deadline, and
// waiting on one would hold the job for good. The call itself cannot be
// taken back; it is left to finish, its result discarded.
func (t *Token) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	key, err := t.signer()
	if err != nil {
		return nil, err
	}
	type result struct {
		sig []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		sig, err := key.Sign(rand, digest, opts)
		done <- result{sig, err}
	}()
	timeout := t.cfg.signTimeout()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			// Closing the module waits for every session in use: with
			// calls hung on it, the next signature opens no new one.
			if t.hung.Load() == 0 {
				t.drop(key)
			}
			return nil, fmt.Errorf("%w: signing on PKCS#11 %s: %v", signer.ErrUnavailable, t.cfg, r.err)
		}
		return r.sig, nil
	case <-timer.C:
		t.hung.Add(1)
		go func() {
			<-done
			t.hung.Add(-1)
		}()
		return nil, fmt.Errorf("%w: PKCS#11 %s did not answer a signature within %s (timeout_ms); the call is left to the token and the job will be tried again", signer.ErrUnavailable, t.cfg, timeout)
	}
}

// signer returns the live key, reconnecting if the token was away.
func (t *Token) signer() (crypto.Signer, error) {
	if key := t.live(); key != nil {
		return key, nil
	}
	t.grp.mu.Lock()
	defer t.grp.mu.Unlock()
	if key := t.live(); key != nil {
		return key, nil
	}
	// Only the key the worker started with (its certificate's) is taken.
	ctx, key, err := connect(t.cfg, t.pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; refusing to sign with another key than the one the worker started with", signer.ErrUnavailable, err)
	}
	t.mu.Lock()
	t.ctx, t.key = ctx, key
	t.mu.Unlock()
	return key, nil
}

func (t *Token) live() crypto.Signer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.key
}

// drop forgets key after it failed, closing its context (which finalizes
// the module when it was the last user) unless another call already did.
func (t *Token) drop(key crypto.Signer) {
	t.grp.mu.Lock()
	defer t.grp.mu.Unlock()
	t.mu.Lock()
	if t.key != key {
		t.mu.Unlock()
		return
	}
	ctx := t.ctx
	t.ctx, t.key = nil, nil
	t.mu.Unlock()
	// Close waits for sessions in use to come back, so never under mu;
	// those calls fail too and find the key already dropped. The other
	// Tokens on the module close theirs too, so the module is finalized.
	for _, c := range append([]*crypto11.Context{ctx}, t.siblingsDrop()...) {
		_ = c.Close()
	}
}

// Ready checks that the token answers: it reconnects if needed and looks the
// key up again in a fresh session (a PKCS#11 round trip that signs nothing).
func (t *Token) Ready(ctx context.Context) error {
	if n := t.hung.Load(); n > 0 {
		return fmt.Errorf("%w: PKCS#11 %s is hung: %d signature(s) have not returned after %s (timeout_ms)", signer.ErrUnavailable, t.cfg, n, t.cfg.signTimeout())
	}
	key, err := t.signer()
	if err != nil {
		return err
	}
	t.mu.Lock()
	c := t.ctx
	t.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w: PKCS#11 %s is closed", signer.ErrUnavailable, t.cfg)
	}
	done := make(chan error, 1)
	go func() {
		_, err := findKey(c, t.cfg, t.pub)
		if err != nil {
			err = fmt.Errorf("the key is no longer on the token: %w", err)
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		return fmt.Errorf("%w: PKCS#11 %s did not answer: %v", signer.ErrUnavailable, t.cfg, ctx.Err())
	}
	if err != nil {
		t.drop(key)
		return fmt.Errorf("%w: PKCS#11 %s: %v", signer.ErrUnavailable, t.cfg, err)
	}
	return nil
}

// Close logs out and releases the module. With signatures still hung on
// the token it leaves the module open instead: closing waits for every
// session in use, so a worker would never finish stopping.
func (t *Token) Close() error {
	t.grp.mu.Lock()
	defer t.grp.mu.Unlock()
	delete(t.grp.members, t)
	t.mu.Lock()
	ctx := t.ctx
	t.ctx, t.key = nil, nil
	t.mu.Unlock()
	if ctx == nil {
		return nil
	}
	if n := t.hung.Load(); n > 0 {
		return fmt.Errorf("PKCS#11 %s left open: %d signature(s) are still hung on the token", t.cfg, n)
	}
	return ctx.Close()
}

func samePublic(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ak.Equal(b)
}

// idFor derives a CKA_ID for a new key from its label, since crypto11 finds
// key pairs only by a non-empty CKA_ID.
func idFor(label string) []byte {
	return bytes.Clone([]byte("hallmark:" + label))
}
