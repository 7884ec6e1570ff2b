package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/renewal"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
)

// Exit codes scripts can rely on (docs/cli.md lists them).
const (
	exitOK       = 0
	exitError    = 1 // the database or the queue failed, or an audit event could not be written
	exitUsage    = 2 // bad flags or arguments, or an invalid configuration
	exitNotFound = 3 // the account, order, certificate or job does not exist
	exitNothing  = 4 // nothing to do (already revoked, already deactivated) or only part was done
	exitStale    = 5 // crl status: an issuer's CRL is stale or missing
	exitRefused  = 6 // revoke: the issuing relay or custom backend refused the revocation
	exitBroken   = 7 // audit verify: a row of the audit log was altered or deleted
)

// jsonFlag is on every command that prints records.
var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print JSON for scripts instead of a table"}

// limitFlag bounds list commands.
var limitFlag = &cli.IntFlag{Name: "limit", Value: 50, Usage: "print at most this many rows (newest first)"}

// session is one command's view of the CA: its configuration and database.
type session struct {
	cfg  config.Config
	db   *open.DB
	st   cliStore
	q    jobs.Queue
	json bool
	out  io.Writer
}

// cliStore is what the commands read and write, with what the services
// they share with the panel take (revocation, operator, renewal, the CRL
// judgement).
type cliStore interface {
	revocation.Store
	operator.Store
	renewal.Store
	store.CRLReader
	store.Reloads
	store.AuditChain
	store.Operators
	AuditAfter(ctx context.Context, after int64, limit int) ([]store.AuditEvent, error)
	AuditRecord(ctx context.Context, ev store.AuditEvent) error // reload.go
	AccountsList(ctx context.Context, p store.Page) ([]*store.Account, string, error)
	AuditFind(ctx context.Context, f store.AuditFilter, p store.Page) ([]store.AuditEvent, string, error)
	AuthzByID(ctx context.Context, id string) (*store.Authorization, error)
	EABByID(ctx context.Context, id string) (*store.EABKey, error)
	EABCreate(ctx context.Context, k store.EABKey, ev store.AuditEvent) (*store.EABKey, error)
	EABDelete(ctx context.Context, id string, ev store.AuditEvent) error
	EABList(ctx context.Context, p store.Page) ([]*store.EABKey, string, error)
	IssuerCert(ctx context.Context, id string) ([]byte, error)
	Issuers(ctx context.Context) ([]string, error)
	KeyBlockedBy(ctx context.Context, spkiHash []byte) (*store.BlockedKey, error)
	KeysBlocked(ctx context.Context, limit int) ([]store.BlockedKey, error)
	KeyUnblock(ctx context.Context, spkiHash []byte, ev store.AuditEvent) error
	Now(ctx context.Context) (time.Time, error)
	OrdersList(ctx context.Context, f store.OrderFilter, p store.Page) ([]*store.Order, string, error)
	RenewalMove(ctx context.Context, sel store.RenewalSelector, start, end time.Time, reason string, ev store.AuditEvent) ([]string, error)
	UpstreamOrdersOf(ctx context.Context, orderID string) ([]store.UpstreamOrder, error)
	store.Pauses                                                                                              // pauses.go
	PerspectiveAnswers(ctx context.Context, challengeID string) ([]store.PerspectiveAnswer, time.Time, error) // perspectives.go
	store.IssuerRecords                                                                                       // issuers.go
}

// withSession loads the configuration, opens the database, runs fn and
// closes it; fn's error becomes an exit code and one sentence on stderr.
func withSession(fn func(ctx context.Context, s *session, c *cli.Context) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		cfg, err := config.Load(c.String("config"))
		if err != nil {
			return cli.Exit(fmt.Sprintf("%v; fix the configuration file (--config or HALLMARK_CONFIG)", err), exitUsage)
		}
		ctx := c.Context
		if ctx == nil {
			ctx = context.Background()
		}
		db, err := open.Open(ctx, cfg.Database.URL, 2)
		if err != nil {
			if errors.Is(err, store.ErrTooNew) {
				return cli.Exit(fmt.Sprintf("%v; use a hallmark binary at least as new as the database", err), exitError)
			}
			return cli.Exit(fmt.Sprintf("%v; check database.url and that the database is reachable", err), exitError)
		}
		defer db.Close()
		db.NotifyRoute(cfg.Notify.Route)
		s := &session{cfg: cfg, db: db, st: db.Store, q: db.Queue, json: c.Bool("json"), out: c.App.Writer}
		if s.out == nil {
			s.out = os.Stdout
		}
		return exitErr(fn(ctx, s, c))
	}
}

// usage is a bad invocation: exit code 2 with the sentence.
func usage(format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...), exitUsage)
}

// exitErr maps an error to its exit code and a sentence for the operator.
func exitErr(err error) error {
	if err == nil {
		return nil
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return err
	}
	msg := err.Error()
	var ae *acme.Error
	if errors.As(err, &ae) && ae.Problem.Detail != "" {
		msg = ae.Problem.Detail
	}
	switch {
	case errors.Is(err, revocation.ErrRefused):
		// Before the problem types: a backend's refusal may be malformed
		// or badRevocationReason, which are not the operator's usage.
		return cli.Exit(msg, exitRefused)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, jobs.ErrJobNotFound):
		return cli.Exit(msg, exitNotFound)
	case errors.Is(err, operator.ErrNothingToDo):
		return cli.Exit(msg, exitNothing)
	case ae != nil && ae.Problem.Type == acme.ProblemAlreadyRevoked:
		return cli.Exit(msg, exitNothing)
	case ae != nil && (ae.Problem.Type == acme.ProblemBadRevocationReason || ae.Problem.Type == acme.ProblemMalformed):
		return cli.Exit(msg, exitUsage)
	}
	return cli.Exit(msg, exitError)
}

// notFound is exit code 3 with the sentence.
func notFound(format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...), exitNotFound)
}

// emit prints v as indented JSON.
func (s *session) emit(v any) error {
	enc := json.NewEncoder(s.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows under a header, aligned.
func (s *session) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// fields prints "key: value" lines, aligned.
func (s *session) fields(kv [][2]string) {
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	for _, f := range kv {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	tw.Flush()
}

func (s *session) printf(format string, args ...any) { fmt.Fprintf(s.out, format, args...) }

// when formats a time for a table: UTC, to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func whenP(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return when(*t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneArg returns the command's single positional argument, or a usage
// error naming it.
func oneArg(c *cli.Context, what string) (string, error) {
	if err := flagsFirst(c); err != nil {
		return "", err
	}
	if c.NArg() != 1 {
		return "", usage("%s needs exactly one %s: hallmark %s [flags] <%s>", c.Command.FullName(), what, c.Command.FullName(), what)
	}
	return c.Args().First(), nil
}

// listLimit reads --limit.
func listLimit(c *cli.Context) (int, error) {
	n := c.Int("limit")
	if n < 1 || n > 10000 {
		return 0, usage("--limit must be between 1 and 10000, got %d", n)
	}
	return n, nil
}

// flagsFirst catches a flag written after an argument, which urfave/cli
// would otherwise take as a second argument.
func flagsFirst(c *cli.Context) error {
	for _, a := range c.Args().Slice()[min(1, c.NArg()):] {
		if strings.HasPrefix(a, "-") {
			return usage("put flags before the argument: hallmark %s [flags] %s", c.Command.FullName(), c.Args().First())
		}
	}
	return nil
}
