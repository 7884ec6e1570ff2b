package main

import (
	"context"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

func accountsCommand() *cli.Command {
	return &cli.Command{
		Name:  "accounts",
		Usage: "list, inspect and deactivate ACME accounts",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list accounts, newest first", Flags: []cli.Flag{limitFlag, jsonFlag}, Action: withSession(accountsList)},
			{Name: "show", Usage: "show one account and its recent orders", ArgsUsage: "<account id>", Flags: []cli.Flag{jsonFlag}, Action: withSession(accountsShow)},
			{Name: "deactivate", Usage: "deactivate an account: its authorizations stop authorizing and its unfinished orders fail", ArgsUsage: "<account id>", Flags: []cli.Flag{jsonFlag}, Action: withSession(accountsDeactivate)},
		},
	}
}

type accountRow struct {
	ID          string    `json:"id"`
	Status      string    `json:"status"`
	Contact     []string  `json:"contact"`
	TermsAgreed bool      `json:"terms_agreed"`
	Thumbprint  string    `json:"thumbprint"`
	CreatedAt   time.Time `json:"created_at"`
}

func accountRowOf(a *store.Account) accountRow {
	r := accountRow{ID: a.ID, Status: string(a.Status), Contact: a.Contact, TermsAgreed: a.TermsAgreed, Thumbprint: a.Thumbprint, CreatedAt: a.CreatedAt.UTC()}
	if r.Contact == nil {
		r.Contact = []string{}
	}
	return r
}

func accountsList(ctx context.Context, s *session, c *cli.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	as, err := store.Rows(limit, func(p store.Page) ([]*store.Account, string, error) { return s.st.AccountsList(ctx, p) })
	if err != nil {
		return err
	}
	out := make([]accountRow, len(as))
	rows := make([][]string, len(as))
	for i, a := range as {
		out[i] = accountRowOf(a)
		rows[i] = []string{a.ID, string(a.Status), orDash(strings.Join(a.Contact, ",")), when(a.CreatedAt)}
	}
	if s.json {
		return s.emit(out)
	}
	s.table([]string{"ID", "STATUS", "CONTACT", "CREATED"}, rows)
	return nil
}

func accountsShow(ctx context.Context, s *session, c *cli.Context) error {
	id, err := oneArg(c, "account id")
	if err != nil {
		return err
	}
	a, err := s.st.AccountByID(ctx, id)
	if err != nil {
		return accountErr(id, err)
	}
	orders, _, err := s.st.OrdersList(ctx, store.OrderFilter{AccountID: id}, store.Page{Limit: 20})
	if err != nil {
		return err
	}
	certs, _, err := s.st.CertificatesList(ctx, store.CertFilter{AccountID: id}, store.Page{Limit: 20})
	if err != nil {
		return err
	}
	if s.json {
		v := struct {
			accountRow
			Orders       []orderRow `json:"recent_orders"`
			Certificates []certRow  `json:"recent_certificates"`
		}{accountRowOf(a), []orderRow{}, []certRow{}}
		for _, o := range orders {
			v.Orders = append(v.Orders, orderRowOf(o))
		}
		for _, c := range certs {
			v.Certificates = append(v.Certificates, certRowOf(c))
		}
		return s.emit(v)
	}
	s.fields([][2]string{
		{"id", a.ID}, {"status", string(a.Status)}, {"contact", orDash(strings.Join(a.Contact, ", "))},
		{"terms agreed", yesNo(a.TermsAgreed)}, {"key thumbprint", a.Thumbprint}, {"created", when(a.CreatedAt)},
	})
	s.printf("\nrecent orders (%d):\n", len(orders))
	printOrders(s, orders)
	s.printf("\nrecent certificates (%d):\n", len(certs))
	printCerts(s, certs)
	return nil
}

func accountsDeactivate(ctx context.Context, s *session, c *cli.Context) error {
	id, err := oneArg(c, "account id")
	if err != nil {
		return err
	}
	a, err := operator.DeactivateAccount(ctx, s.st, id, operator.CLIActor())
	if err != nil {
		return accountErr(id, err)
	}
	if s.json {
		return s.emit(accountRowOf(a))
	}
	s.printf("account %s is deactivated: its authorizations no longer authorize and its unfinished orders are invalid; its certificates stay valid (revoke them with `hallmark revoke --account %s`)\n", id, id)
	return nil
}

func accountErr(id string, err error) error {
	if isNotFound(err) {
		return notFound("account %s does not exist; `hallmark accounts list` shows the accounts", id)
	}
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
