package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// rotationSettles is how long a worker may sign by the mapping it read
// before a rotation (worker.issuerMapTTL, 1 s), with a margin: `issuers
// rotate` returns once every worker signs with the new issuer.
const rotationSettles = 1500 * time.Millisecond

func issuersCommand() *cli.Command {
	return &cli.Command{
		Name:  "issuers",
		Usage: "the issuers of local and PKCS#11 profiles: create an intermediate, rotate a profile to it, retire the old one",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list issuers with their state, profiles, certificates outstanding and CRL freshness",
				Flags: []cli.Flag{jsonFlag}, Action: withSession(issuersList)},
			{Name: "create", Usage: "create a new intermediate under the root of ca.dir, its key in ca.dir or on a PKCS#11 token (runs `hallmark-worker ca intermediate`: the CLI holds no key)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Required: true, Usage: "the intermediate's common name"},
					&cli.StringFlag{Name: "key-type", Value: "p256", Usage: "p256, p384, rsa2048, rsa3072, rsa4096"},
					&cli.StringFlag{Name: "pkcs11", Usage: "generate the key on the token of this [backends.<name>] (type pkcs11) instead of in ca.dir"},
					&cli.StringFlag{Name: "key-label", Usage: "with --pkcs11: the new key's label on the token (default hallmark-issuer-<random>)"},
				}, Action: issuersCreate},
			{Name: "rotate", Usage: "make a profile sign with these issuers, on every worker, without a restart; the old ones become retiring",
				ArgsUsage: "<issuer id>...", Flags: []cli.Flag{
					&cli.StringFlag{Name: "profile", Required: true, Usage: "the profile ([profiles.<name>], backend local or pkcs11)"},
					jsonFlag}, Action: withSession(issuersRotate)},
			{Name: "retire", Usage: "retire an issuer: active (no profile names it) -> retiring; retiring (no certificate outstanding) -> retired",
				ArgsUsage: "<issuer id>", Flags: []cli.Flag{jsonFlag}, Action: withSession(issuersRetire)},
		},
	}
}

// issuerRow is an issuer as `issuers list --json` prints it: the shared
// line, and its CRLs' freshness.
type issuerRow struct {
	operator.IssuerLine
	CRL string `json:"crl"`
}

func issuersList(ctx context.Context, s *session, c *cli.Context) error {
	recs, err := s.st.IssuerRecordsList(ctx)
	if err != nil {
		return err
	}
	now, err := s.st.Now(ctx)
	if err != nil {
		return err
	}
	out := make([]issuerRow, len(recs))
	rows := make([][]string, len(recs))
	for i, r := range recs {
		crl := "none yet"
		if h, err := store.JudgeIssuerCRL(ctx, s.st, r.ID, now); err != nil {
			crl = "unreadable: " + err.Error()
		} else if h.Newest != nil {
			crl = "signed " + now.Sub(h.Newest.ThisUpdate).Truncate(time.Second).String() + " ago"
			if h.Stale {
				crl += ", STALE: " + h.Why
			}
		}
		out[i] = issuerRow{IssuerLine: operator.IssuerLineOf(r), CRL: crl}
		key := "ca.dir"
		if r.Backend != "" {
			key = "pkcs11:" + r.Backend + " " + r.KeyLabel
		}
		rows[i] = []string{r.ID, r.Name, r.KeyType, key, string(r.State), strings.Join(r.Profiles, ","),
			strconv.Itoa(r.Outstanding), strconv.Itoa(len(r.Chains)), when(r.NotAfter), crl}
	}
	if s.json {
		return s.emit(out)
	}
	s.table([]string{"ID", "NAME", "KEY", "KEY AT", "STATE", "PROFILES", "OUTSTANDING", "ALT CHAINS", "NOT AFTER", "CRL"}, rows)
	return nil
}

// issuersCreate runs hallmark-worker beside this binary
// (operator.CreateIssuer, the panel's path too): key generation and the
// root's signature happen in the binary that links the signer.
func issuersCreate(c *cli.Context) error {
	bin, err := operator.WorkerBeside()
	if err != nil {
		return err
	}
	_, out, err := operator.CreateIssuer(c.Context, operator.NewIssuer{Worker: bin, Config: c.String("config"),
		Name: c.String("name"), KeyType: c.String("key-type"), Actor: operator.CLIActor(),
		PKCS11: c.String("pkcs11"), KeyLabel: c.String("key-label")})
	if err != nil {
		return cli.Exit(fmt.Sprintf("creating the intermediate: %v", err), exitError)
	}
	fmt.Fprint(c.App.Writer, out)
	return nil
}

func issuersRotate(ctx context.Context, s *session, c *cli.Context) error {
	profile := c.String("profile")
	p, ok := s.cfg.Profiles[profile]
	if !ok {
		return usage("--profile %s: there is no [profiles.%s]", profile, profile)
	}
	keys, managed := p.IssuerKeys()
	if !managed {
		return usage("--profile %s: its backend is %s; only a local or pkcs11 profile's issuer rotates here", profile, p.Backend)
	}
	if c.NArg() == 0 {
		return usage("name the issuer ids to sign with (hallmark issuers list)")
	}
	retiring, err := operator.RotateIssuers(ctx, s.st, profile, keys, c.Args().Slice(), operator.CLIActor())
	if err != nil {
		return issuerErr(err)
	}
	// Every worker reads the mapping afresh within a second.
	time.Sleep(rotationSettles)
	if s.json {
		return s.emit(map[string]any{"profile": profile, "issuers": c.Args().Slice(), "retiring": retiring})
	}
	s.printf("profile %s signs with %s on every worker\n", profile, strings.Join(c.Args().Slice(), ", "))
	for _, id := range retiring {
		s.printf("issuer %s is retiring: it signs only CRLs until its last certificate expires\n", id)
	}
	return nil
}

func issuersRetire(ctx context.Context, s *session, c *cli.Context) error {
	id, err := oneArg(c, "issuer id")
	if err != nil {
		return err
	}
	state, err := operator.RetireIssuer(ctx, s.st, id, operator.CLIActor())
	if err != nil {
		return issuerErr(err)
	}
	if s.json {
		return s.emit(map[string]string{"id": id, "state": string(state)})
	}
	s.printf("issuer %s is %s\n", id, state)
	return nil
}

// issuerErr is a refused issuer action's exit: 3 for an unknown issuer, 4
// for one that may not move (nothing changed), 1 otherwise.
func issuerErr(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return cli.Exit(fmt.Sprintf("%v; hallmark issuers list shows the issuers", err), exitNotFound)
	case errors.Is(err, store.ErrConflict):
		return cli.Exit(fmt.Sprintf("%v; nothing changed", err), exitNothing)
	}
	return err
}
