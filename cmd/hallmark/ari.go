package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// ariCommand is `hallmark ari move`: tell ARI-aware clients (RFC 9773) to
// renew now, before a bulk revocation, by moving renewal windows into the
// past. The reason becomes the explanationURL page.
func ariCommand() *cli.Command {
	return &cli.Command{
		Name:  "ari",
		Usage: "renewal information (RFC 9773): move certificates' renewal windows",
		Subcommands: []*cli.Command{{
			Name:  "move",
			Usage: "move the renewal windows of the selected live certificates into the past so ARI clients renew now",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "serial", Usage: "one certificate, by serial (hex)"},
				&cli.StringFlag{Name: "issuer", Usage: "every certificate of an issuer id"},
				&cli.StringFlag{Name: "profile", Usage: "every certificate of a profile"},
				&cli.StringFlag{Name: "account", Usage: "every certificate of an account id"},
				&cli.StringFlag{Name: "reason", Required: true, Usage: "why; shown to subscribers on the explanation page"},
				jsonFlag,
			},
			Action: withSession(func(ctx context.Context, s *session, c *cli.Context) error {
				sel := store.RenewalSelector{Serial: c.String("serial"), IssuerID: c.String("issuer"), Profile: c.String("profile"), AccountID: c.String("account")}
				if sel.Empty() {
					return usage("name the certificates to move with --serial, --issuer, --profile or --account")
				}
				now, err := s.st.Now(ctx)
				if err != nil {
					return err
				}
				// A window that ended before now: RFC 9773 §4.2 clients renew
				// at once when the window is in the past.
				moved, err := s.st.RenewalMove(ctx, sel, now.Add(-time.Hour), now.Add(-time.Second), c.String("reason"),
					store.AuditEvent{Actor: operator.CLIActor(), Action: "ari.move", Subject: fmt.Sprintf("%+v", sel), Detail: c.String("reason")})
				if err != nil {
					return err
				}
				if moved == nil {
					moved = []string{} // a list is an array, never null
				}
				switch {
				case s.json:
					if err := s.emit(map[string]any{"moved": moved}); err != nil {
						return err
					}
				case len(moved) > 0:
					for _, m := range moved {
						s.printf("%s\n", m)
					}
					s.printf("moved the renewal window of %d certificate(s) into the past\n", len(moved))
				}
				if len(moved) == 0 {
					return cli.Exit("no live certificate matches; nothing moved", exitNothing)
				}
				return nil
			}),
		}},
	}
}
