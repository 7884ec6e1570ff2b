package main

import (
	"context"
	"errors"

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
			Name: "move",
			Usage: "move the renewal windows of the selected live certificates into the past so ARI clients renew now " +
				"(the admin panel and API do the same for one certificate)",
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
				moved, err := operator.MoveRenewal(ctx, s.st, sel, c.String("reason"), operator.CLIActor())
				if errors.Is(err, operator.ErrNothingToDo) {
					moved, err = []string{}, nil // a list is an array, never null
				}
				if err != nil {
					return err
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
