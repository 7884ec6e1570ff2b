package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// eabCommand is `hallmark eab create|delete|list`: external account binding keys
// (RFC 8555 §7.3.4) for server.external_account_required.
func eabCommand() *cli.Command {
	return &cli.Command{
		Name:  "eab",
		Usage: "external account binding keys (RFC 8555 §7.3.4)",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "issue a key id and MAC key that binds one ACME account", Flags: []cli.Flag{
				&cli.StringFlag{Name: "label", Usage: "who the key is for (shown in lists and the audit log)"},
				&cli.StringSliceFlag{Name: "allow-domain", Usage: "limit the account to names under this suffix (repeatable)"},
				&cli.StringSliceFlag{Name: "allow-ip", Usage: "limit the account to addresses in this CIDR (repeatable)"},
				&cli.BoolFlag{Name: "prevalidated", Usage: "the allowed names need no challenge: authorizations are born valid (needs --allow-domain or --allow-ip)"},
				jsonFlag,
			}, Action: withSession(eabCreate)},
			{Name: "delete", Usage: "withdraw a key that has bound no account (leaked, or no longer needed)", ArgsUsage: "<kid>",
				Action: withSession(eabDelete)},
			{Name: "list", Usage: "list keys and the accounts they bound", Flags: []cli.Flag{jsonFlag, limitFlag}, Action: withSession(eabList)},
		},
	}
}

// eabLimits is the key --allow-domain, --allow-ip and --prevalidated
// describe, each checked.
func eabLimits(c *cli.Context) (store.EABKey, error) {
	k := store.EABKey{Label: c.String("label"), AllowedDomains: c.StringSlice("allow-domain"),
		AllowedIPRanges: c.StringSlice("allow-ip"), PreValidated: c.Bool("prevalidated")}
	for i, d := range k.AllowedDomains {
		d = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "."))
		if d == "" || strings.ContainsAny(d, "*/ ") {
			return k, usage("--allow-domain %q is not a domain suffix", c.StringSlice("allow-domain")[i])
		}
		k.AllowedDomains[i] = d
	}
	for _, r := range k.AllowedIPRanges {
		if _, _, err := net.ParseCIDR(r); err != nil {
			return k, usage("--allow-ip %q is not a CIDR", r)
		}
	}
	if k.PreValidated && !k.Limited() {
		return k, usage("--prevalidated vouches for names without a challenge: limit them with --allow-domain or --allow-ip")
	}
	return k, nil
}

func eabCreate(ctx context.Context, s *session, c *cli.Context) error {
	k, err := eabLimits(c)
	if err != nil {
		return err
	}
	id, mac := make([]byte, 12), make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	if _, err := rand.Read(mac); err != nil {
		return err
	}
	k.ID, k.MACKey = "eab_"+base64.RawURLEncoding.EncodeToString(id), mac
	created, err := s.st.EABCreate(ctx, k, store.AuditEvent{Actor: operator.CLIActor(), Action: "eab.create", Subject: k.ID,
		Detail: fmt.Sprintf("label %q domains %v ips %v prevalidated %v", k.Label, k.AllowedDomains, k.AllowedIPRanges, k.PreValidated)})
	if err != nil {
		return err
	}
	hmacKey := base64.RawURLEncoding.EncodeToString(mac)
	if s.json {
		return s.emit(map[string]any{"kid": created.ID, "hmac": hmacKey})
	}
	s.fields([][2]string{{"kid", created.ID}, {"hmac", hmacKey}})
	s.printf("give both to the subscriber, e.g. lego --eab --kid %s --hmac %s; the MAC key is shown once\n", created.ID, hmacKey)
	return nil
}

func eabDelete(ctx context.Context, s *session, c *cli.Context) error {
	id, err := oneArg(c, "kid")
	if err != nil {
		return err
	}
	err = s.st.EABDelete(ctx, id, store.AuditEvent{Actor: operator.CLIActor(), Action: "eab.delete", Subject: id})
	switch {
	case isNotFound(err):
		return notFound("EAB key %s does not exist; `hallmark eab list` shows the keys", id)
	case errors.Is(err, store.ErrConflict):
		k, kerr := s.st.EABByID(ctx, id)
		if kerr != nil {
			return kerr
		}
		// Its limits are its account's; deleting it would lift them.
		return cli.Exit(fmt.Sprintf("EAB key %s already bound account %s and stays; to stop that account, `hallmark accounts deactivate %s`", id, k.AccountID, k.AccountID), exitNothing)
	case err != nil:
		return err
	}
	s.printf("EAB key %s is deleted: no account can bind it\n", id)
	return nil
}

func eabList(ctx context.Context, s *session, c *cli.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	keys, _, err := s.st.EABList(ctx, store.Page{Limit: limit})
	if err != nil {
		return err
	}
	type row struct {
		KID          string   `json:"kid"`
		Label        string   `json:"label"`
		Domains      []string `json:"allowed_domains"`
		IPRanges     []string `json:"allowed_ip_ranges"`
		PreValidated bool     `json:"prevalidated"`
		Account      string   `json:"account"`
		Created      string   `json:"created"`
	}
	rows := make([]row, 0, len(keys))
	var table [][]string
	for _, k := range keys {
		r := row{k.ID, k.Label, k.AllowedDomains, k.AllowedIPRanges, k.PreValidated, k.AccountID, when(k.CreatedAt)}
		rows = append(rows, r)
		table = append(table, []string{r.KID, orDash(r.Label), orDash(strings.Join(append(append([]string{}, r.Domains...), r.IPRanges...), ",")),
			fmt.Sprint(r.PreValidated), orDash(r.Account), r.Created})
	}
	if s.json {
		return s.emit(rows)
	}
	s.table([]string{"KID", "LABEL", "LIMITS", "PREVALIDATED", "ACCOUNT", "CREATED"}, table)
	return nil
}
