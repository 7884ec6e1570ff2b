package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/store"
)

func crlCommand() *cli.Command {
	return &cli.Command{
		Name:  "crl",
		Usage: "inspect the CRLs the workers sign",
		Subcommands: []*cli.Command{{
			Name:  "status",
			Usage: "per issuer: the newest CRL's number, thisUpdate, nextUpdate, entries, and whether it is stale",
			Description: "A CRL is stale when its nextUpdate has passed or a revocation's serial is not in it\n" +
				"(a worker has not signed the CRL that lists it yet). Exit code 5 when any issuer is stale or has no CRL.",
			Flags:  []cli.Flag{jsonFlag},
			Action: withSession(crlStatus),
		}},
	}
}

type crlRow struct {
	Issuer      string     `json:"issuer"`
	Number      int64      `json:"number"` // 0: no CRL yet
	ThisUpdate  *time.Time `json:"this_update,omitempty"`
	NextUpdate  *time.Time `json:"next_update,omitempty"`
	Entries     int        `json:"entries"`
	Revocations int        `json:"revocations"`
	// Unlisted counts revocations whose serial the newest CRL does not list.
	Unlisted int    `json:"unlisted"`
	Stale    bool   `json:"stale"`
	Why      string `json:"why,omitempty"`
}

func crlStatus(ctx context.Context, s *session, c *cli.Context) error {
	ids, err := s.st.Issuers(ctx)
	if err != nil {
		return err
	}
	now, err := s.st.Now(ctx)
	if err != nil {
		return err
	}
	out := []crlRow{}
	stale := 0
	for _, id := range ids {
		r := crlRow{Issuer: id}
		revs, err := s.st.Revocations(ctx, id)
		if err != nil {
			return err
		}
		r.Revocations = len(revs)
		crl, err := s.st.CRLLatest(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			r.Unlisted = len(revs)
			r.Stale, r.Why = true, "no CRL signed yet"
		case err != nil:
			return err
		default:
			r.Number = crl.Number
			tu, nu := crl.ThisUpdate.UTC(), crl.NextUpdate.UTC()
			r.ThisUpdate, r.NextUpdate = &tu, &nu
			// Serials, not times: a revocation committed after the worker
			// read the list can predate thisUpdate and be in no CRL.
			if l, err := crl.Unlisted(revs); err == nil {
				r.Entries, r.Unlisted = l.Entries, len(l.Unlisted)
			} else {
				r.Entries, r.Unlisted = -1, len(revs)
			}
			switch {
			case r.Entries < 0:
				r.Stale, r.Why = true, "the newest CRL does not parse"
			case now.After(crl.NextUpdate):
				r.Stale, r.Why = true, "nextUpdate has passed"
			case r.Unlisted > 0:
				r.Stale, r.Why = true, strconv.Itoa(r.Unlisted)+" revocation(s) not listed yet"
			}
		}
		if r.Stale {
			stale++
		}
		out = append(out, r)
	}
	if s.json {
		if err := s.emit(out); err != nil {
			return err
		}
	} else {
		rows := make([][]string, len(out))
		for i, r := range out {
			num, entries, state := "-", strconv.Itoa(r.Entries), "fresh"
			if r.Number > 0 {
				num = strconv.FormatInt(r.Number, 10)
			} else {
				entries = "-"
			}
			if r.Entries < 0 {
				entries = "unparseable"
			}
			if r.Stale {
				state = "STALE: " + r.Why
			}
			rows[i] = []string{r.Issuer, num, whenP(r.ThisUpdate), whenP(r.NextUpdate), entries, strconv.Itoa(r.Revocations), state}
		}
		s.table([]string{"ISSUER", "NUMBER", "THIS UPDATE", "NEXT UPDATE", "ENTRIES", "REVOCATIONS", "STATE"}, rows)
	}
	if stale > 0 {
		return cli.Exit(strconv.Itoa(stale)+" issuer(s) have a stale CRL; check that a worker mounting the issuer is running (`hallmark jobs list --kind crl_generate`)", exitStale)
	}
	return nil
}
