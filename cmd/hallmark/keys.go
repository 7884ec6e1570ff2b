package main

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// keyFlags name the key a keys command acts on: exactly one file.
var keyFlags = []cli.Flag{
	&cli.StringFlag{Name: "cert", Usage: "a certificate (PEM or DER) whose key it is"},
	&cli.StringFlag{Name: "csr", Usage: "a certificate request (PEM or DER) whose key it is"},
	&cli.StringFlag{Name: "public-key", Usage: "the public key (PEM PUBLIC KEY or RSA PUBLIC KEY, or DER SubjectPublicKeyInfo)"},
}

// keysCommand is `hallmark keys block|list|unblock|show`: keys reported
// compromised, which Hallmark never certifies again (CA/B Forum BR §6.1.1.3).
func keysCommand() *cli.Command {
	return &cli.Command{
		Name:  "keys",
		Usage: "keys reported compromised: block one, list them, or check one",
		Subcommands: []*cli.Command{
			{Name: "block", Usage: "block a key reported compromised (by anyone, with or without a certificate of ours) and revoke " +
				"its unexpired certificates with reason keyCompromise",
				Flags: append(append([]cli.Flag{}, keyFlags...),
					&cli.StringFlag{Name: "source", Usage: "who reported it and how, for the record (e.g. \"mail from the subscriber, ticket 123\")"},
					jsonFlag),
				Action: withSession(keysBlock)},
			{Name: "list", Usage: "the blocked keys, the latest blocked first",
				Flags:  []cli.Flag{&cli.IntFlag{Name: "limit", Value: 100, Usage: "list at most this many (0: all)"}, jsonFlag},
				Action: withSession(keysList)},
			{Name: "unblock", Usage: "remove a key's block recorded by mistake, so the key may be certified again (the certificates " +
				"the block revoked stay revoked; exit 3 when it is not blocked)",
				ArgsUsage: "[<sha256 of the key's SubjectPublicKeyInfo, hex>]",
				Flags: append(append([]cli.Flag{}, keyFlags...),
					&cli.StringFlag{Name: "reason", Usage: "why the block was a mistake, for the record"}),
				Action: withSession(keysUnblock)},
			{Name: "show", Usage: "whether a key is blocked, when, why and by whom (exit 3 when it is not)",
				ArgsUsage: "[<sha256 of the key's SubjectPublicKeyInfo, hex>]",
				Flags:     append(append([]cli.Flag{}, keyFlags...), jsonFlag),
				Action:    withSession(keysShow)},
		},
	}
}

func keysBlock(ctx context.Context, s *session, c *cli.Context) error {
	h, from, err := keyArg(c)
	if err != nil {
		return err
	}
	why := "reported to the operator (" + from + ")"
	if src := strings.TrimSpace(c.String("source")); src != "" {
		why += ": " + src
	}
	res, err := s.st.KeyBlock(ctx, store.BlockedKey{SPKIHash: h, Why: why, Actor: operator.CLIActor()})
	if err != nil {
		return err
	}
	if s.json {
		if err := s.emit(blockJSON(res)); err != nil {
			return err
		}
	} else {
		s.showBlockResult(res)
	}
	if res.Already && len(res.Revoked)+len(res.Queued) == 0 {
		return cli.Exit(fmt.Sprintf("key %s was blocked already, on %s, and has no unrevoked certificate: nothing to do", res.Key.Hex(), when(res.Key.BlockedAt)), exitNothing)
	}
	return nil
}

// showBlockResult prints the blocked key and a table of the certificates
// blocking it revoked or queued for revocation.
func (s *session) showBlockResult(res store.KeyBlockResult) {
	s.showBlock(res.Key)
	var rows [][]string
	for _, c := range res.Revoked {
		rows = append(rows, []string{c.Serial, c.IssuerID, strings.Join(c.Names, ","), "revoked"})
	}
	for _, c := range res.Queued {
		rows = append(rows, []string{c.Serial, c.IssuerID, strings.Join(c.Names, ","), "queued"})
	}
	if len(rows) > 0 {
		s.printf("\n")
		s.table([]string{"SERIAL", "ISSUER", "NAMES", "OUTCOME"}, rows)
	}
}

func keysList(ctx context.Context, s *session, c *cli.Context) error {
	if c.Int("limit") < 0 {
		return usage("--limit must be 0 (all) or more")
	}
	list, err := s.st.KeysBlocked(ctx, c.Int("limit"))
	if err != nil {
		return err
	}
	if s.json {
		out := make([]blockedJSON, 0, len(list))
		for _, b := range list {
			out = append(out, blockJSON(store.KeyBlockResult{Key: b}))
		}
		return s.emit(out)
	}
	var rows [][]string
	for _, b := range list {
		rows = append(rows, []string{b.Hex(), when(b.BlockedAt), orDash(b.Serial), b.Actor, b.Why})
	}
	s.table([]string{"KEY (SHA-256 OF ITS SPKI)", "BLOCKED", "REPORTED BY", "ACTOR", "WHY"}, rows)
	return nil
}

func keysUnblock(ctx context.Context, s *session, c *cli.Context) error {
	h, from, err := keyArg(c)
	if err != nil {
		return err
	}
	err = operator.UnblockKey(ctx, s.st, h, c.String("reason"), operator.CLIActor())
	if isNotFound(err) {
		return notFound("key %s (%s) is not blocked", hex.EncodeToString(h), from)
	}
	if err != nil {
		return err
	}
	s.printf("key %s unblocked: Hallmark may certify it again; the certificates its block revoked stay revoked\n", hex.EncodeToString(h))
	return nil
}

func keysShow(ctx context.Context, s *session, c *cli.Context) error {
	h, from, err := keyArg(c)
	if err != nil {
		return err
	}
	b, err := s.st.KeyBlockedBy(ctx, h)
	if isNotFound(err) {
		return notFound("key %s (%s) is not blocked", hex.EncodeToString(h), from)
	}
	if err != nil {
		return err
	}
	if s.json {
		return s.emit(blockJSON(store.KeyBlockResult{Key: *b}))
	}
	s.showBlock(*b)
	return nil
}

func (s *session) showBlock(b store.BlockedKey) {
	s.fields([][2]string{{"key (sha256 of its SPKI)", b.Hex()}, {"blocked", when(b.BlockedAt)},
		{"reported by certificate", orDash(b.Serial)}, {"why", b.Why}, {"actor", b.Actor}})
}

type blockedJSON struct {
	SPKISHA256 string   `json:"spki_sha256"`
	BlockedAt  string   `json:"blocked_at"`
	Serial     string   `json:"serial"`
	Why        string   `json:"why"`
	Actor      string   `json:"actor"`
	Already    bool     `json:"already_blocked"`
	Revoked    []string `json:"revoked"`
	Queued     []string `json:"queued"`
}

func blockJSON(r store.KeyBlockResult) blockedJSON {
	out := blockedJSON{SPKISHA256: r.Key.Hex(), BlockedAt: when(r.Key.BlockedAt), Serial: r.Key.Serial, Why: r.Key.Why,
		Actor: r.Key.Actor, Already: r.Already, Revoked: []string{}, Queued: []string{}}
	for _, c := range r.Revoked {
		out.Revoked = append(out.Revoked, c.Serial)
	}
	for _, c := range r.Queued {
		out.Queued = append(out.Queued, c.Serial)
	}
	return out
}

// keyArg is the hash (store.KeyHash) of the key the command names, and
// what named it (for the record): one of --cert, --csr, --public-key, or
// for show and unblock the hash itself as the argument.
func keyArg(c *cli.Context) ([]byte, string, error) {
	if err := flagsFirst(c); err != nil {
		return nil, "", err
	}
	var set []string
	for _, f := range []string{"cert", "csr", "public-key"} {
		if c.String(f) != "" {
			set = append(set, f)
		}
	}
	switch {
	case len(set) == 0 && (c.Command.Name == "show" || c.Command.Name == "unblock") && c.NArg() == 1:
		h, ok := store.ParseKeyHash(c.Args().First())
		if !ok {
			return nil, "", usage("%q is not a SHA-256 in hex (64 hex digits)", c.Args().First())
		}
		return h, "its hash", nil
	case len(set) != 1 || c.NArg() != 0:
		return nil, "", usage("name the key with exactly one of --cert, --csr or --public-key")
	}
	path := c.String(set[0])
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", usage("reading --%s: %v", set[0], err)
	}
	h, err := keyHashOf(set[0], raw)
	if err != nil {
		return nil, "", usage("--%s %s: %v", set[0], path, err)
	}
	return h, fmt.Sprintf("--%s %s", set[0], filepath.Base(path)), nil
}

// keyHashOf reads the key out of a file of kind (cert, csr, public-key),
// PEM or DER, and hashes its SubjectPublicKeyInfo as the frontend and the
// worker do.
func keyHashOf(kind string, raw []byte) ([]byte, error) {
	der, pemType := raw, ""
	if b, _ := pem.Decode(raw); b != nil {
		der, pemType = b.Bytes, b.Type
	}
	switch kind {
	case "cert":
		crt, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("not a certificate: %w", err)
		}
		return store.KeyHash(crt.RawSubjectPublicKeyInfo), nil
	case "csr":
		req, err := x509.ParseCertificateRequest(der)
		if err != nil {
			return nil, fmt.Errorf("not a certificate request: %w", err)
		}
		return store.KeyHash(req.RawSubjectPublicKeyInfo), nil
	}
	if pemType == "RSA PUBLIC KEY" {
		pub, err := x509.ParsePKCS1PublicKey(der)
		if err != nil {
			return nil, fmt.Errorf("not an RSA public key: %w", err)
		}
		return store.PublicKeyHash(pub)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		if strings.Contains(pemType, "PRIVATE") {
			return nil, errors.New("this is a private key; give its public key (openssl pkey -pubout)")
		}
		return nil, fmt.Errorf("not a public key: %w", err)
	}
	return store.PublicKeyHash(pub)
}
