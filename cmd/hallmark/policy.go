package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/accesswire"
	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
)

// policyCommand is `hallmark policy show|explain`: the client access
// policy ([access]) as loaded, and what it says of a request.
func policyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "the client access policy ([access]): who may ask",
		Subcommands: []*cli.Command{
			{
				Name:  "show",
				Usage: "print the access policy as loaded: mode, default, how the client is found, checks and rules",
				Action: func(c *cli.Context) error {
					_, pol, err := loadPolicy(c)
					if err != nil {
						return err
					}
					return pol.Show(c.App.Writer)
				},
			},
			{
				Name:  "explain",
				Usage: "evaluate a request as the frontend would: each check's answer, each rule, the decision",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "client-addr", Required: true, Usage: "the address the frontend sees the request come from (its TCP peer)"},
					&cli.StringSliceFlag{Name: "forwarded-for", Usage: "a value of the forwarded header (access.forwarded_header) as the proxy sends it (repeatable)"},
					&cli.StringSliceFlag{Name: "identifier", Usage: "dns:NAME or ip:ADDRESS of a newOrder (repeatable); a bare value is dns, or ip if it is an address"},
					&cli.StringFlag{Name: "profile", Usage: "the order's profile (default: default_profile)"},
					&cli.StringFlag{Name: "account", Usage: "the account that signs it: its external account binding is read from the database"},
					&cli.StringFlag{Name: "request", Usage: "the endpoint: new-order (the default with --identifier), new-authz, new-account (the default without --account), revoke-cert, or another (challenge, finalize, ...; the default with --account)"},
				},
				Action: explainAction,
			},
		},
	}
}

func loadPolicy(c *cli.Context) (config.Config, *access.Policy, error) {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return cfg, nil, cli.Exit(fmt.Sprintf("%v; fix the configuration file (--config or HALLMARK_CONFIG)", err), exitUsage)
	}
	pol, err := accesswire.Policy(cfg)
	if err != nil {
		return cfg, nil, cli.Exit(fmt.Sprintf("building the access policy: %v", err), exitUsage)
	}
	return cfg, pol, nil
}

func explainAction(c *cli.Context) error {
	cfg, pol, err := loadPolicy(c)
	if err != nil {
		return err
	}
	in, err := explainInput(c, cfg)
	if err != nil {
		return err
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if in.Kind == access.KindOrder {
		if refused := checkIdentifiers(cfg, &in); refused != nil {
			fmt.Fprintf(c.App.Writer, "decision: refused by [policy] before the access policy: %s\n", refused.Problem.Detail)
			return nil
		}
	}
	if id := c.String("account"); id != "" {
		db, err := open.Open(ctx, cfg.Database.URL, 2)
		if err != nil {
			return cli.Exit(fmt.Sprintf("%v; check database.url and that the database is reachable", err), exitError)
		}
		defer db.Close()
		if _, err := db.Store.AccountByID(ctx, id); errors.Is(err, store.ErrNotFound) {
			return notFound("there is no account %s", id)
		} else if err != nil {
			return cli.Exit(err.Error(), exitError)
		}
		in.Account = &access.Account{ID: id, EAB: storedBinding(db.Store, id)}
	}
	if pol == nil {
		return pol.Show(c.App.Writer)
	}
	return pol.Explain(ctx, in).Write(c.App.Writer, pol.Warn())
}

// explainInput is the request the flags describe. Without --account, a
// request an account signs is one with no external account binding.
func explainInput(c *cli.Context, cfg config.Config) (access.Input, error) {
	peer, err := netip.ParseAddr(c.String("client-addr"))
	if err != nil {
		return access.Input{}, usage("--client-addr %q is not an IP address", c.String("client-addr"))
	}
	in := access.Input{Peer: peer.Unmap(), Forwarded: c.StringSlice("forwarded-for"), Profile: c.String("profile")}
	if in.Profile == "" {
		in.Profile = cfg.DefaultProfile
	}
	for _, v := range c.StringSlice("identifier") {
		in.Identifiers = append(in.Identifiers, parseIdentifier(v))
	}
	req := strings.ReplaceAll(c.String("request"), "-", "_")
	switch {
	case req != "":
	case len(in.Identifiers) > 0:
		req = "new_order"
	case c.String("account") == "":
		req = "new_account"
	default:
		req = "account"
	}
	in.Route = req
	switch req {
	case "new_order", "new_authz":
		in.Kind = access.KindOrder
		if len(in.Identifiers) == 0 {
			return in, usage("--request %s needs at least one --identifier", c.String("request"))
		}
	case "new_account":
		in.Kind = access.KindNewAccount
	case "revoke_cert":
		in.Kind = access.KindRevoke
	default:
		in.Kind = access.KindAccount
	}
	if in.Kind != access.KindOrder && len(in.Identifiers) > 0 {
		return in, usage("--identifier belongs to new-order or new-authz, not --request %s", c.String("request"))
	}
	if in.Kind != access.KindNewAccount && in.Kind != access.KindRevoke {
		in.Account = &access.Account{ID: "(none given)", EAB: func(context.Context) (*access.EAB, error) { return nil, nil }}
	}
	return in, nil
}

func parseIdentifier(v string) acme.Identifier {
	if t, val, ok := strings.Cut(v, ":"); ok && (t == "dns" || t == "ip") {
		return acme.Identifier{Type: acme.IdentifierType(t), Value: val}
	}
	if _, err := netip.ParseAddr(v); err == nil {
		return acme.Identifier{Type: acme.IdentifierIP, Value: v}
	}
	return acme.Identifier{Type: acme.IdentifierDNS, Value: v}
}

// checkIdentifiers runs the identifier policy ([policy] and the profile's
// rules) as newOrder does before the access policy sees the identifiers,
// normalising them in place; its refusal, or nil.
func checkIdentifiers(cfg config.Config, in *access.Input) *acme.Error {
	prof, ok := cfg.Profiles[in.Profile]
	if !ok {
		return acme.AsError(acme.New(acme.ProblemInvalidProfile, "there is no profile %q", in.Profile))
	}
	pol, err := policy.New(cfg.Policy)
	if err == nil {
		var ids []acme.Identifier
		if ids, err = pol.Check(in.Identifiers, prof); err == nil {
			in.Identifiers = ids
			return nil
		}
	}
	return acme.AsError(err)
}

// storedBinding reads the account's external account binding as the
// frontend does.
func storedBinding(st store.Store, id string) func(context.Context) (*access.EAB, error) {
	return func(ctx context.Context) (*access.EAB, error) {
		k, err := st.AccountEAB(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &access.EAB{KeyID: k.ID, Label: k.Label}, nil
	}
}
