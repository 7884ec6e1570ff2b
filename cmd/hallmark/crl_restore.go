package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

func crlRestoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "revoke again what a CRL this CA published lists: after restoring the database from an older copy",
		ArgsUsage: "FILE",
		Description: "FILE is a CRL (DER or PEM) one of this CA's issuers signed before the database was restored, saved from\n" +
			"GET /crl/<issuer> or a relying party's cache. Each certificate it lists is revoked again with the reason it\n" +
			"lists, as `hallmark revoke` would (its revocation time is now; keyCompromise blocks the key). A serial the\n" +
			"database does not know was issued after the copy was taken: listed as unknown, exit 4.\n" +
			"docs/operations.md, Backups.",
		Flags:  []cli.Flag{&cli.BoolFlag{Name: "dry-run", Usage: "list what would be revoked and change nothing"}, jsonFlag},
		Action: withSession(crlRestore),
	}
}

// crlRestoreRow is revoke's row with the reason the CRL lists; its
// outcome may also be unknown (a serial the database does not know).
type crlRestoreRow struct {
	revokeRow
	Reason int `json:"reason"`
}

type crlRestoreReport struct {
	Issuer       string          `json:"issuer"`
	Number       string          `json:"number"`
	DryRun       bool            `json:"dry_run"`
	Actor        string          `json:"actor"`
	Certificates []crlRestoreRow `json:"certificates"`
}

func crlRestore(ctx context.Context, s *session, c *cli.Context) error {
	crl, err := readCRL(c)
	if err != nil {
		return err
	}
	issuer, err := crlIssuer(ctx, s.st, crl)
	if err != nil {
		return err
	}
	rep := crlRestoreReport{Issuer: issuer, DryRun: c.Bool("dry-run"), Actor: operator.CLIActor(), Certificates: []crlRestoreRow{}}
	if crl.Number != nil {
		rep.Number = crl.Number.String()
	}
	svc := revocation.New(s.st, s.cfg.Profiles)
	byReason, unknown, err := rep.match(ctx, s.st, svc, crl)
	if err != nil {
		return err
	}
	failed := rep.revoke(ctx, svc, byReason)
	if s.json {
		if err := s.emit(rep); err != nil {
			return err
		}
	} else {
		rep.print(s)
	}
	switch {
	case failed > 0:
		return cli.Exit(fmt.Sprintf("%d of %d revocations failed (see above); fix the cause and run the command again", failed, len(rep.Certificates)), exitNothing)
	case unknown > 0:
		return cli.Exit(fmt.Sprintf("%d of %d certificates the CRL lists are not in this database: they were issued after its copy was taken, and Hallmark cannot revoke them (docs/operations.md, Backups)", unknown, len(rep.Certificates)), exitNothing)
	}
	return nil
}

// readCRL parses the CRL the argument names, DER or PEM.
func readCRL(c *cli.Context) (*x509.RevocationList, error) {
	file, err := oneArg(c, "FILE")
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, usage("reading the CRL: %v", err)
	}
	if b, _ := pem.Decode(raw); b != nil {
		raw = b.Bytes
	}
	crl, err := x509.ParseRevocationList(raw)
	if err != nil {
		return nil, usage("%s is not a CRL (DER or PEM): %v", file, err)
	}
	return crl, nil
}

// match adds a row for each entry of crl and returns the certificates to
// revoke again by reason, and how many entries this database does not know
// as the CRL issuer's.
func (rep *crlRestoreReport) match(ctx context.Context, st cliStore, svc *revocation.Service, crl *x509.RevocationList) (map[int][]*store.Certificate, int, error) {
	byReason := map[int][]*store.Certificate{}
	unknown := 0
	for _, e := range crl.RevokedCertificateEntries {
		serial := resolveSerial(ctx, st, e.SerialNumber.Text(16))
		row := crlRestoreRow{revokeRow: revokeRow{Serial: serial}, Reason: e.ReasonCode}
		cert, err := st.CertificateBySerial(ctx, serial)
		switch {
		case errors.Is(err, store.ErrNotFound):
			row.Outcome, row.Error = "unknown", "not in this database: issued after its copy was taken"
			unknown++
		case err != nil:
			return nil, 0, err
		case cert.IssuerID != rep.Issuer:
			// Serials are random, but unique per issuer only: this CRL
			// says nothing of another issuer's certificate.
			row.Outcome, row.Error = "unknown", fmt.Sprintf("this database's certificate %s is issuer %s's, not the CRL's", cert.Serial, cert.IssuerID)
			unknown++
		default:
			row.revokeRow = revokeRow{Serial: cert.Serial, Names: cert.Names, Issuer: cert.IssuerID, Profile: cert.Profile, Backend: svc.Backend(cert), NotAfter: when(cert.NotAfter)}
			switch {
			case cert.RevokedAt != nil && !revocation.ReportsKey(revocation.Reason(e.ReasonCode), cert):
				alreadyRevoked(&row.revokeRow, cert)
			case rep.DryRun:
				row.Outcome = "would-revoke"
			default:
				byReason[e.ReasonCode] = append(byReason[e.ReasonCode], cert)
			}
		}
		rep.Certificates = append(rep.Certificates, row)
	}
	return byReason, unknown, nil
}

// revoke revokes each reason's certificates together, as a page of
// `hallmark revoke --account` is (revocation.Service.RevokeAll), records
// each outcome in its row and returns how many failed.
func (rep *crlRestoreReport) revoke(ctx context.Context, svc *revocation.Service, byReason map[int][]*store.Certificate) int {
	at := map[string]int{} // serial → its row in rep.Certificates
	for i, r := range rep.Certificates {
		at[r.Serial] = i
	}
	reasons := make([]int, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Ints(reasons)
	failed := 0
	for _, reason := range reasons {
		certs := byReason[reason]
		for start := 0; start < len(certs); start += 1000 {
			page := certs[start:min(start+1000, len(certs))]
			outs := svc.RevokeAll(ctx, page, revocation.Request{Reason: revocation.Reason(reason), Actor: rep.Actor, Via: "hallmark crl restore"})
			for i, o := range outs {
				row := &rep.Certificates[at[page[i].Serial]]
				switch {
				case errors.Is(o.Err, store.ErrConflict) && o.Certificate != nil && o.Certificate.RevokedAt != nil:
					alreadyRevoked(&row.revokeRow, o.Certificate)
				case o.Err != nil:
					row.Outcome, row.Error = "failed", exitErr(o.Err).Error()
					failed++
				case o.Remote && !o.Done:
					row.Outcome = "queued"
				default:
					row.Outcome = "revoked"
				}
			}
		}
	}
	return failed
}

func (rep *crlRestoreReport) print(s *session) {
	verb := "revoking again"
	if rep.DryRun {
		verb = "dry run: would revoke again"
	}
	s.printf("%s what CRL %s of issuer %s lists, as %s\n", verb, orDash(rep.Number), rep.Issuer, rep.Actor)
	table := make([][]string, len(rep.Certificates))
	for i, r := range rep.Certificates {
		table[i] = []string{r.Serial, strings.Join(r.Names, ","), strconv.Itoa(r.Reason) + " " + revocation.Reason(r.Reason).String(), r.Outcome, orDash(r.Error)}
	}
	s.table([]string{"SERIAL", "NAMES", "REASON", "OUTCOME", "NOTE"}, table)
}

// crlIssuer is the id of the issuer of this CA whose certificate verifies
// crl's signature.
func crlIssuer(ctx context.Context, st cliStore, crl *x509.RevocationList) (string, error) {
	ids, err := st.Issuers(ctx)
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		der, err := st.IssuerCert(ctx, id)
		if err != nil {
			continue // a relay's or custom backend's issuer publishes none
		}
		cert, err := x509.ParseCertificate(der)
		if err == nil && crl.CheckSignatureFrom(cert) == nil {
			return id, nil
		}
	}
	return "", usage("the CRL is not signed by an issuer of this CA (%d known); name a CRL this CA published", len(ids))
}
