package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func ordersCommand() *cli.Command {
	return &cli.Command{
		Name:  "orders",
		Usage: "list and inspect orders (why is an order stuck?)",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list orders, newest first", Flags: []cli.Flag{
				&cli.StringFlag{Name: "account", Usage: "only this account's orders"},
				&cli.StringFlag{Name: "identifier", Usage: "only orders naming this identifier (a DNS name or an IP)"},
				&cli.StringFlag{Name: "status", Usage: "only orders in this status: pending, ready, processing, valid, invalid"},
				limitFlag, jsonFlag,
			}, Action: withSession(ordersList)},
			{Name: "show", Usage: "show an order with its authorizations, challenges and errors", ArgsUsage: "<order id>", Flags: []cli.Flag{jsonFlag}, Action: withSession(ordersShow)},
		},
	}
}

type orderRow struct {
	ID          string            `json:"id"`
	Account     string            `json:"account"`
	Status      string            `json:"status"`
	Identifiers []acme.Identifier `json:"identifiers"`
	Profile     string            `json:"profile"`
	Expires     time.Time         `json:"expires"`
	Certificate string            `json:"certificate,omitempty"`
	Error       *acme.Problem     `json:"error,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// upstreamRow is an upstream order a relay backend placed for the order.
type upstreamRow struct {
	Backend    string    `json:"backend"`
	OrderURL   string    `json:"order_url"`
	AccountURL string    `json:"account_url"`
	PlacedAt   time.Time `json:"placed_at"`
}

func orderRowOf(o *store.Order) orderRow {
	r := orderRow{ID: o.ID, Account: o.AccountID, Status: string(o.Status), Identifiers: o.Identifiers, Profile: o.Profile,
		Expires: o.Expires.UTC(), Certificate: o.CertSerial, Error: o.Error, CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC()}
	if r.Identifiers == nil {
		r.Identifiers = []acme.Identifier{}
	}
	return r
}

func identifiers(ids []acme.Identifier) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.Value
	}
	return strings.Join(parts, ",")
}

var orderStatuses = map[string]bool{"pending": true, "ready": true, "processing": true, "valid": true, "invalid": true}

func ordersList(ctx context.Context, s *session, c *cli.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	f := store.OrderFilter{AccountID: c.String("account"), Identifier: strings.ToLower(c.String("identifier")), Status: acme.Status(c.String("status"))}
	if f.Status != "" && !orderStatuses[string(f.Status)] {
		return usage("--status %q is not an order status; use pending, ready, processing, valid or invalid", f.Status)
	}
	os, err := store.Rows(limit, func(p store.Page) ([]*store.Order, string, error) { return s.st.OrdersList(ctx, f, p) })
	if err != nil {
		return err
	}
	if s.json {
		out := make([]orderRow, len(os))
		for i, o := range os {
			out[i] = orderRowOf(o)
		}
		return s.emit(out)
	}
	printOrders(s, os)
	return nil
}

func printOrders(s *session, os []*store.Order) {
	rows := make([][]string, len(os))
	for i, o := range os {
		problem := "-"
		if o.Error != nil {
			problem = o.Error.Detail
		}
		rows[i] = []string{o.ID, string(o.Status), identifiers(o.Identifiers), o.Profile, o.AccountID, orDash(o.CertSerial), when(o.CreatedAt), problem}
	}
	s.table([]string{"ID", "STATUS", "IDENTIFIERS", "PROFILE", "ACCOUNT", "CERTIFICATE", "CREATED", "ERROR"}, rows)
}

type challengeRow struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Status           string          `json:"status"`
	Validated        *time.Time      `json:"validated,omitempty"`
	Error            *acme.Problem   `json:"error,omitempty"`
	ValidationRecord json.RawMessage `json:"validation_record,omitempty"`
	// Perspectives are the network perspectives' answers (perspectives.go).
	Perspectives []perspectiveRow `json:"perspectives,omitempty"`
}

type authzRow struct {
	ID         string          `json:"id"`
	Identifier acme.Identifier `json:"identifier"`
	Wildcard   bool            `json:"wildcard"`
	Status     string          `json:"status"`
	Expires    time.Time       `json:"expires"`
	Challenges []challengeRow  `json:"challenges"`
}

// orderDetail is an order with its authorizations and a relay's upstream
// orders, as `orders show --json` prints it.
type orderDetail struct {
	orderRow
	Authorizations []authzRow    `json:"authorizations"`
	UpstreamOrders []upstreamRow `json:"upstream_orders"`
}

func ordersShow(ctx context.Context, s *session, c *cli.Context) error {
	id, err := oneArg(c, "order id")
	if err != nil {
		return err
	}
	o, err := s.st.OrderByID(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return notFound("order %s does not exist; `hallmark orders list` shows the orders", id)
		}
		return err
	}
	d, err := orderDetailOf(ctx, s.st, o)
	if err != nil {
		return err
	}
	if s.json {
		return s.emit(d)
	}
	printOrder(s, o, d)
	return nil
}

func orderDetailOf(ctx context.Context, st cliStore, o *store.Order) (orderDetail, error) {
	d := orderDetail{orderRow: orderRowOf(o), Authorizations: []authzRow{}}
	for _, aid := range o.AuthzIDs {
		a, err := st.AuthzByID(ctx, aid)
		if err != nil {
			return d, err
		}
		ar := authzRow{ID: a.ID, Identifier: a.Identifier, Wildcard: a.Wildcard, Status: string(a.Status), Expires: a.Expires.UTC(), Challenges: []challengeRow{}}
		for _, ch := range a.Challenges {
			cr := challengeRow{ID: ch.ID, Type: string(ch.Type), Status: string(ch.Status), Validated: ch.Validated, Error: ch.Error, ValidationRecord: ch.ValidationRecord}
			if cr.Perspectives, err = perspectiveRows(ctx, st, ch.ID); err != nil {
				return d, err
			}
			ar.Challenges = append(ar.Challenges, cr)
		}
		d.Authorizations = append(d.Authorizations, ar)
	}
	// A relay's upstream orders: where its certificate came from, or, for
	// an order that failed after one was placed, where to look for an
	// upstream certificate Hallmark never stored (docs/backends.md).
	ups, err := st.UpstreamOrdersOf(ctx, o.ID)
	if err != nil {
		return d, err
	}
	d.UpstreamOrders = make([]upstreamRow, 0, len(ups))
	for _, u := range ups {
		d.UpstreamOrders = append(d.UpstreamOrders, upstreamRow{Backend: u.Backend, OrderURL: u.OrderURL, AccountURL: u.AccountURL, PlacedAt: u.PlacedAt.UTC()})
	}
	return d, nil
}

func printOrder(s *session, o *store.Order, d orderDetail) {
	problem := "-"
	if o.Error != nil {
		problem = string(o.Error.Type) + ": " + o.Error.Detail
	}
	s.fields([][2]string{
		{"id", o.ID}, {"status", string(o.Status)}, {"account", o.AccountID}, {"identifiers", identifiers(o.Identifiers)},
		{"profile", o.Profile}, {"expires", when(o.Expires)}, {"certificate", orDash(o.CertSerial)},
		{"created", when(o.CreatedAt)}, {"updated", when(o.UpdatedAt)}, {"error", problem},
	})
	s.printf("\nauthorizations:\n")
	var rows [][]string
	for _, a := range d.Authorizations {
		name := a.Identifier.Value
		if a.Wildcard {
			name = "*." + name
		}
		for _, ch := range a.Challenges {
			e := "-"
			if ch.Error != nil {
				e = string(ch.Error.Type) + ": " + ch.Error.Detail
			}
			rows = append(rows, []string{a.ID, name, a.Status, ch.Type, ch.Status, whenP(ch.Validated), e})
		}
		if len(a.Challenges) == 0 {
			rows = append(rows, []string{a.ID, name, a.Status, "-", "-", "-", "-"})
		}
	}
	s.table([]string{"AUTHZ", "IDENTIFIER", "AUTHZ STATUS", "CHALLENGE", "STATUS", "VALIDATED", "ERROR"}, rows)
	printPerspectives(s, d)
	if len(d.UpstreamOrders) > 0 {
		s.printf("\nupstream orders (relay backends):\n")
		var rows [][]string
		for _, u := range d.UpstreamOrders {
			rows = append(rows, []string{u.Backend, u.OrderURL, u.AccountURL, when(u.PlacedAt)})
		}
		s.table([]string{"BACKEND", "UPSTREAM ORDER", "UPSTREAM ACCOUNT", "PLACED"}, rows)
		if o.Status == acme.StatusInvalid {
			s.printf("\nthe order failed after its upstream order was placed: if the upstream issued for it, that certificate is live there and not in Hallmark; revoke it with the upstream account's key\n")
		}
	}
	if o.Status == acme.StatusProcessing {
		s.printf("\nthe order is processing: `hallmark jobs list --kind %s` shows its signing job\n", jobs.KindSignerIssue)
	}
}

func isNotFound(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, jobs.ErrJobNotFound)
}
