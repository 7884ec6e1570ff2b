package relay

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
)

// authorize answers the configured challenge of the pending upstream
// authorization z as challenge_strategy says, and waits for z's verdict:
// "bypass" accepts and waits (the upstream grants the account itself);
// "dns01" publishes the TXT record first and removes it after the
// verdict, valid or invalid; "http01" stores the answer the frontend
// serves, and deletes it after the verdict.
func (b *Backend) authorize(ctx context.Context, z *xacme.Authorization) error {
	var chal *xacme.Challenge
	for _, c := range z.Challenges {
		if c.Type == b.cfg.Challenge {
			chal = c
		}
	}
	if chal == nil {
		return acme.New(acme.ProblemRejectedIdentifier, "the upstream CA offers no %s challenge for %s", b.cfg.Challenge, z.Identifier.Value)
	}
	if b.cfg.ChallengeStrategy == "http01" {
		ka, err := b.client.HTTP01ChallengeResponse(chal.Token)
		if err != nil {
			return acme.Internal(fmt.Errorf("the key authorization of the upstream token: %w", err))
		}
		// Served until the attempt's end at the latest; deleted sooner.
		if err := b.cfg.Tokens.RelayTokenPut(ctx, b.cfg.Name, chal.Token, ka, b.cfg.Timeout+time.Minute); err != nil {
			return fmt.Errorf("%w: storing the http-01 answer for %s: %v", signer.ErrUnavailable, z.Identifier.Value, err)
		}
		defer b.withdraw(ctx, chal.Token)
	}
	if b.dns != nil {
		value, err := b.client.DNS01ChallengeRecord(chal.Token)
		if err != nil {
			return acme.Internal(fmt.Errorf("the dns-01 record of the upstream token: %w", err))
		}
		name := recordName(z.Identifier.Value)
		if err := b.dns.update(ctx, name, value, true); err != nil {
			return err
		}
		defer b.unpublish(ctx, name, value)
		if err := b.dns.served(ctx, name, value); err != nil {
			return err
		}
	}
	if _, err := b.client.Accept(ctx, chal); err != nil {
		return b.classify("accepting an upstream challenge", err)
	}
	if _, err := b.client.WaitAuthorization(ctx, z.URI); err != nil {
		return b.classify("waiting for an upstream authorization", err)
	}
	return nil
}

// unpublish removes a dns-01 record once its authorization is decided, on
// a context of its own: the attempt's may have run out.
func (b *Backend) unpublish(ctx context.Context, name, value string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := b.dns.update(ctx, name, value, false); err != nil {
		b.cfg.Logger.Warn("the dns-01 record of an upstream authorization could not be removed; remove it by hand",
			"backend", b.cfg.Name, "record", name, "value", value, "err", err)
	}
}

// withdraw deletes an http-01 answer once its authorization is decided.
func (b *Backend) withdraw(ctx context.Context, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := b.cfg.Tokens.RelayTokenDelete(ctx, token); err != nil {
		b.cfg.Logger.Warn("the http-01 answer of an upstream authorization could not be deleted; it expires on its own",
			"backend", b.cfg.Name, "token", token, "err", err)
	}
}

// binding is the external account binding of backend name's eab_kid and
// eab_hmac_key_file, nil when none is configured.
func binding(name string, c signerconf.Relay) (*xacme.ExternalAccountBinding, error) {
	if c.EABKID == "" {
		return nil, nil
	}
	data, err := os.ReadFile(c.EABHMACKeyFile)
	if err != nil {
		return nil, fmt.Errorf("backends.%s.eab_hmac_key_file: %w", name, err)
	}
	key, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(string(data)), "="))
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("backends.%s.eab_hmac_key_file: %s must hold the HMAC key the upstream CA gave, base64url", name, c.EABHMACKeyFile)
	}
	return &xacme.ExternalAccountBinding{KID: c.EABKID, Key: key}, nil
}
