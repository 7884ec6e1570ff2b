package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/admin/operatorca"
	"github.com/hallmark-ca/hallmark/store"
)

// operatorsCommand is `hallmark operators`: the people who sign in to the
// panel with a client certificate from the operators' CA, and their roles.
func operatorsCommand() *cli.Command {
	return &cli.Command{
		Name:  "operators",
		Usage: "the panel's operators: client certificates from the operators' CA, and their roles",
		Subcommands: []*cli.Command{
			{Name: "init-ca", Usage: "create the operators' CA at admin.client_ca_file and admin.client_ca_key_file",
				Action: withSession(operatorsInitCA)},
			{Name: "add", Usage: "issue a client certificate for a new operator (or bind an OpenID Connect identity) and record their role", ArgsUsage: "<name>", Flags: []cli.Flag{
				&cli.StringFlag{Name: "role", Required: true, Usage: "`R`: viewer (reads), operator (revokes, deactivates, job retry/abandon, pause lifts, ARI moves) or admin"},
				&cli.DurationFlag{Name: "valid", Value: 90 * 24 * time.Hour, Usage: "how long the certificate (or the OpenID Connect binding) is valid"},
				&cli.StringFlag{Name: "oidc-subject", Usage: "bind the operator to the `SUB` claim of admin.oidc.issuer's ID tokens instead of issuing a certificate"},
				&cli.StringFlag{Name: "out", Value: ".", Usage: "write NAME.pem and NAME.key (mode 0600) in `DIR`"},
			}, Action: withSession(operatorsAdd)},
			{Name: "list", Usage: "list operators, their roles and certificates", Flags: []cli.Flag{jsonFlag}, Action: withSession(operatorsList)},
			{Name: "revoke", Usage: "refuse an operator's certificate from now on", ArgsUsage: "<name>", Action: withSession(operatorsRevoke)},
		},
	}
}

func operatorsInitCA(_ context.Context, s *session, _ *cli.Context) error {
	a := s.cfg.Admin
	if a.ClientCAFile == "" || a.ClientCAKeyFile == "" {
		return usage("set admin.client_ca_file and admin.client_ca_key_file: where the operators' CA goes")
	}
	ca, err := operatorca.Init(a.ClientCAFile, a.ClientCAKeyFile, "Hallmark operators CA")
	if errors.Is(err, os.ErrExist) {
		return cli.Exit(fmt.Sprintf("%v; the operators' CA exists already: add operators with it", err), exitNothing)
	}
	if err != nil {
		return err
	}
	s.printf("operators' CA %s written to %s (key %s); valid until %s\n", ca.Cert.Subject.CommonName, a.ClientCAFile, a.ClientCAKeyFile, when(ca.Cert.NotAfter))
	return nil
}

func operatorsAdd(ctx context.Context, s *session, c *cli.Context) error {
	name, role := c.Args().First(), c.String("role")
	if c.NArg() != 1 || name == "" || !store.Storable(name) || len(name) > 64 {
		return usage("give one operator name (at most 64 characters)")
	}
	if !slices.Contains(store.Roles, role) {
		return usage("--role %q is not viewer, operator or admin", role)
	}
	if c.IsSet("oidc-subject") {
		return operatorsAddOIDC(ctx, s, name, role, c.String("oidc-subject"), c.Duration("valid"))
	}
	ca, err := operatorca.Load(s.cfg.Admin.ClientCAFile, s.cfg.Admin.ClientCAKeyFile)
	if err != nil {
		return cli.Exit(fmt.Sprintf("%v; create the operators' CA with `hallmark operators init-ca`", err), exitUsage)
	}
	cred, err := ca.Issue(name, c.Duration("valid"))
	if err != nil {
		return err
	}
	certPath, keyPath := filepath.Join(c.String("out"), name+".pem"), filepath.Join(c.String("out"), name+".key")
	if err := writeExclusive(keyPath, cred.KeyPEM, 0o600); err != nil {
		return cli.Exit(fmt.Sprintf("writing the key: %v", err), exitUsage)
	}
	if err := writeExclusive(certPath, cred.CertPEM, 0o644); err != nil {
		return cli.Exit(fmt.Sprintf("writing the certificate: %v", err), exitUsage)
	}
	fp := operatorca.CertSHA256(cred.Cert)
	err = s.st.OperatorAdd(ctx, store.Operator{Name: name, Role: role, CertSHA256: fp, NotAfter: cred.Cert.NotAfter},
		store.AuditEvent{Actor: operator.CLIActor(), Action: "operator.add", Subject: name, Detail: fmt.Sprintf("role %s, certificate %s", role, fp)})
	if err != nil {
		_ = os.Remove(keyPath)
		_ = os.Remove(certPath)
		if errors.Is(err, store.ErrConflict) {
			return cli.Exit(fmt.Sprintf("operator %s exists already; revoke them first or choose another name", name), exitNothing)
		}
		return err
	}
	s.printf("operator %s (%s) added; certificate %s, key %s, valid until %s\n", name, role, certPath, keyPath, when(cred.Cert.NotAfter))
	s.printf("for a browser: openssl pkcs12 -export -in %s -inkey %s -out %s.p12\n", certPath, keyPath, name)
	return nil
}

// operatorsAddOIDC binds name to an OpenID Connect identity: the issuer's
// subject, which the provider never reassigns (unlike an email address or
// a user name), is the row's credential (adminconf.OIDCIdentity).
func operatorsAddOIDC(ctx context.Context, s *session, name, role, subject string, valid time.Duration) error {
	issuer := s.cfg.Admin.OIDC.Issuer
	if issuer == "" {
		return usage("--oidc-subject needs [admin.oidc] issuer in the configuration: the provider whose subject it is")
	}
	if subject == "" || len(subject) > 255 || !store.Storable(subject) {
		return usage("--oidc-subject: give the sub claim (at most 255 characters), as the panel's refusal page shows it")
	}
	cred := adminconf.OIDCIdentity(issuer, subject)
	notAfter := time.Now().Add(valid)
	err := s.st.OperatorAdd(ctx, store.Operator{Name: name, Role: role, CertSHA256: cred, NotAfter: notAfter},
		store.AuditEvent{Actor: operator.CLIActor(), Action: "operator.add", Subject: name, Detail: fmt.Sprintf("role %s, OpenID Connect subject %s at %s", role, subject, issuer)})
	if errors.Is(err, store.ErrConflict) {
		return cli.Exit(fmt.Sprintf("operator %s, or an operator with that identity, exists already; revoke them first or choose another name", name), exitNothing)
	}
	if err != nil {
		return err
	}
	s.printf("operator %s (%s) added; signs in with %s as subject %s until %s\n", name, role, issuer, subject, when(notAfter))
	return nil
}

func writeExclusive(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func operatorsList(ctx context.Context, s *session, _ *cli.Context) error {
	ops, err := s.st.OperatorsList(ctx)
	if err != nil {
		return err
	}
	if s.json {
		type row struct {
			Name       string     `json:"name"`
			Role       string     `json:"role"`
			CertSHA256 string     `json:"cert_sha256"`
			NotAfter   time.Time  `json:"not_after"`
			RevokedAt  *time.Time `json:"revoked_at,omitempty"`
		}
		out := make([]row, len(ops))
		for i, o := range ops {
			out[i] = row{o.Name, o.Role, o.CertSHA256, o.NotAfter, o.RevokedAt}
		}
		return s.emit(out)
	}
	rows := make([][]string, len(ops))
	for i, o := range ops {
		revoked := "-"
		if o.RevokedAt != nil {
			revoked = when(*o.RevokedAt)
		}
		rows[i] = []string{o.Name, o.Role, when(o.NotAfter), revoked, o.CertSHA256}
	}
	s.table([]string{"NAME", "ROLE", "NOT AFTER", "REVOKED", "CERTIFICATE SHA-256 OR oidc:ISSUER#SUBJECT"}, rows)
	return nil
}

func operatorsRevoke(ctx context.Context, s *session, c *cli.Context) error {
	name := c.Args().First()
	if c.NArg() != 1 || name == "" {
		return usage("give one operator name")
	}
	if err := s.st.OperatorRevoke(ctx, name, store.AuditEvent{Actor: operator.CLIActor(), Action: "operator.revoke", Subject: name}); err != nil {
		return err
	}
	s.printf("operator %s revoked: their certificate is refused from now on\n", name)
	return nil
}
