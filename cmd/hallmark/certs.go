package main

import (
	"context"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/protocol/renewal"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

func certsCommand() *cli.Command {
	return &cli.Command{
		Name:  "certs",
		Usage: "list and inspect issued certificates",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list certificates, newest first", Flags: []cli.Flag{
				&cli.StringFlag{Name: "account", Usage: "only this account's certificates"},
				&cli.StringFlag{Name: "name", Usage: "only certificates for this DNS name or IP"},
				&cli.StringFlag{Name: "expiring-before", Usage: "only certificates whose notAfter is before this date (2006-01-02 or RFC 3339)"},
				&cli.BoolFlag{Name: "revoked", Usage: "only revoked certificates"},
				&cli.BoolFlag{Name: "unrevoked", Usage: "only certificates that are not revoked"},
				limitFlag, jsonFlag,
			}, Action: withSession(certsList)},
			{Name: "show", Usage: "show one certificate by serial", ArgsUsage: "<serial>", Flags: []cli.Flag{
				&cli.BoolFlag{Name: "pem", Usage: "print the certificate chain as PEM after the details"},
				jsonFlag,
			}, Action: withSession(certsShow)},
		},
	}
}

// parseDate reads 2006-01-02 (midnight UTC) or RFC 3339.
func parseDate(s string) (time.Time, bool) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

func certsList(ctx context.Context, s *session, c *cli.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	f := store.CertFilter{AccountID: c.String("account"), Name: strings.ToLower(c.String("name"))}
	if v := c.String("expiring-before"); v != "" {
		t, ok := parseDate(v)
		if !ok {
			return usage("--expiring-before %q is not a date; use 2006-01-02 or RFC 3339 (2006-01-02T15:04:05Z)", v)
		}
		f.ExpiringBefore = &t
	}
	switch {
	case c.Bool("revoked") && c.Bool("unrevoked"):
		return usage("--revoked and --unrevoked exclude each other; give one")
	case c.Bool("revoked"):
		yes := true
		f.Revoked = &yes
	case c.Bool("unrevoked"):
		no := false
		f.Revoked = &no
	}
	cs, err := store.Rows(limit, func(p store.Page) ([]*store.Certificate, string, error) { return s.st.CertificatesList(ctx, f, p) })
	if err != nil {
		return err
	}
	if s.json {
		out := make([]certRow, len(cs))
		for i, c := range cs {
			out[i] = certRowOf(c)
		}
		return s.emit(out)
	}
	printCerts(s, cs)
	return nil
}

func printCerts(s *session, cs []*store.Certificate) {
	rows := make([][]string, len(cs))
	for i, c := range cs {
		revoked := "-"
		if c.RevokedAt != nil {
			revoked = when(*c.RevokedAt) + " " + revocation.Reason(c.RevocationReason).String()
		}
		rows[i] = []string{c.Serial, strings.Join(c.Names, ","), c.Profile, c.AccountID, when(c.NotAfter), revoked}
	}
	s.table([]string{"SERIAL", "NAMES", "PROFILE", "ACCOUNT", "NOT AFTER", "REVOKED"}, rows)
}

func certsShow(ctx context.Context, s *session, c *cli.Context) error {
	arg, err := oneArg(c, "serial")
	if err != nil {
		return err
	}
	serial := resolveSerial(ctx, s.st, arg)
	cert, err := s.st.CertificateBySerial(ctx, serial)
	if err != nil {
		if isNotFound(err) {
			return notFound("certificate %s does not exist; `hallmark certs list --name <name>` finds certificates by name", serial)
		}
		return err
	}
	// What its ARI clients are told (renewalInfo's own rule).
	win, err := renewal.Suggested(ctx, s.st, cert, s.cfg.Profiles[cert.Profile])
	if err != nil {
		return err
	}
	if s.json {
		v := struct {
			certRow
			Backend       string        `json:"backend"`
			RenewalWindow renewalWindow `json:"renewal_window"`
			ChainPEM      string        `json:"chain_pem"`
		}{certRowOf(cert), revocation.New(s.st, s.cfg.Profiles).Backend(cert), renewalWindowOf(win), string(cert.ChainPEM)}
		return s.emit(v)
	}
	revoked := "no"
	if cert.RevokedAt != nil {
		revoked = when(*cert.RevokedAt) + ", reason " + revocation.Reason(cert.RevocationReason).String()
	}
	s.fields([][2]string{
		{"serial", cert.Serial}, {"names", strings.Join(cert.Names, ", ")}, {"account", cert.AccountID}, {"order", cert.OrderID},
		{"issuer", cert.IssuerID}, {"profile", cert.Profile}, {"backend", revocation.New(s.st, s.cfg.Profiles).Backend(cert)},
		{"not before", when(cert.NotBefore)}, {"not after", when(cert.NotAfter)}, {"issued", when(cert.IssuedAt)},
		{"revoked", revoked}, {"replaced by", orDash(cert.ReplacedBy)},
		{"renewal window", renewalText(win)},
	})
	if c.Bool("pem") {
		s.printf("\n%s", cert.ChainPEM)
	}
	return nil
}

// renewalWindow is a certificate's ARI window in `certs show --json`.
type renewalWindow struct {
	Start          string `json:"start"`
	End            string `json:"end"`
	Source         string `json:"source"` // profile, operator or upstream
	Reason         string `json:"reason,omitempty"`
	ExplanationURL string `json:"explanation_url,omitempty"`
}

func renewalWindowOf(w renewal.Window) renewalWindow {
	return renewalWindow{Start: when(w.Start), End: when(w.End), Source: string(w.Source), Reason: w.Reason, ExplanationURL: w.ExplanationURL}
}

// renewalText is the window and whose it is, for `certs show`.
func renewalText(w renewal.Window) string {
	span := when(w.Start) + " — " + when(w.End)
	switch w.Source {
	case renewal.FromOperator:
		return span + ", moved by an operator: " + w.Reason
	case renewal.FromUpstream:
		if w.ExplanationURL != "" {
			return span + ", the upstream CA's (" + w.ExplanationURL + ")"
		}
		return span + ", the upstream CA's"
	}
	return span + ", the profile's"
}
