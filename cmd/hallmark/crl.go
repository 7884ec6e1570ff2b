package main

import (
	"context"
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
			Usage: "per issuer and CRL shard: the newest CRL's number, age, size, nextUpdate, entries, and whether it is stale",
			Description: "One row per shard that has a CRL or an entry (shard 0, the unsharded URL's, always).\n" +
				"A CRL is stale when there is none, when it does not parse, when its nextUpdate has passed, or when a\n" +
				"revocation's serial is not in it (a worker has not signed the CRL that lists it yet): the admin panel's\n" +
				"rule too (store.JudgeCRL). A relay or custom issuer's revocation status is its backend's; it is never stale.\n" +
				"Exit code 5 when any issuer is stale.",
			Flags:  []cli.Flag{jsonFlag},
			Action: withSession(crlStatus),
		}, crlRestoreCommand()},
	}
}

type crlRow struct {
	Issuer      string     `json:"issuer"`
	Shard       int        `json:"shard"`
	Number      int64      `json:"number"` // 0: no CRL yet
	ThisUpdate  *time.Time `json:"this_update,omitempty"`
	NextUpdate  *time.Time `json:"next_update,omitempty"`
	AgeSeconds  int64      `json:"age_seconds,omitempty"` // since thisUpdate, on the database's clock
	Bytes       int        `json:"bytes"`                 // the newest CRL's size
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
		shards, err := store.JudgeIssuerCRLs(ctx, s.st, id, now)
		if err != nil {
			return err
		}
		for _, h := range shards {
			r := crlRow{Issuer: id, Shard: h.Shard, Bytes: h.Bytes(), Entries: h.Entries, Revocations: h.Revocations, Unlisted: h.Unlisted, Stale: h.Stale, Why: h.Why}
			if crl := h.Newest; crl != nil {
				r.Number = crl.Number
				tu, nu := crl.ThisUpdate.UTC(), crl.NextUpdate.UTC()
				r.ThisUpdate, r.NextUpdate = &tu, &nu
				r.AgeSeconds = int64(now.Sub(tu).Seconds())
			}
			if r.Stale {
				stale++
			}
			out = append(out, r)
		}
	}
	if s.json {
		if err := s.emit(out); err != nil {
			return err
		}
	} else {
		rows := make([][]string, len(out))
		for i, r := range out {
			num, entries, age, size, state := "-", strconv.Itoa(r.Entries), "-", "-", "fresh"
			if r.Number > 0 {
				num = strconv.FormatInt(r.Number, 10)
				age = (time.Duration(r.AgeSeconds) * time.Second).String()
				size = strconv.Itoa(r.Bytes)
			} else {
				entries = "-"
			}
			if r.Entries < 0 {
				entries = "unparseable"
			}
			switch {
			case r.Stale:
				state = "STALE: " + r.Why
			case r.Why != "":
				state = r.Why
			}
			rows[i] = []string{r.Issuer, strconv.Itoa(r.Shard), num, age, whenP(r.NextUpdate), size, entries, strconv.Itoa(r.Revocations), state}
		}
		s.table([]string{"ISSUER", "SHARD", "NUMBER", "AGE", "NEXT UPDATE", "BYTES", "ENTRIES", "REVOCATIONS", "STATE"}, rows)
	}
	if stale > 0 {
		return cli.Exit(strconv.Itoa(stale)+" CRL shard(s) are stale; check that a worker mounting the issuer is running (`hallmark jobs list --kind crl_generate`)", exitStale)
	}
	return nil
}
