package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

func revokeCommand() *cli.Command {
	return &cli.Command{
		Name:      "revoke",
		Usage:     "revoke a certificate, an order's certificate or every certificate of an account",
		ArgsUsage: "[serial]",
		Description: "Revokes through the same code path as the ACME API and records an audit event (actor cli:<os user>).\n" +
			"Local and pkcs11 certificates are revoked at once and the issuer's next CRL is queued;\n" +
			"relay and custom certificates are queued for their backend; --wait waits for its answer,\n" +
			"revoked or refused (a refusal exits 6 and quotes the backend's reason).\n" +
			"Reasons: " + reasonList() + ".",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "serial", Usage: "the certificate's serial (hex; colons allowed)"},
			&cli.StringFlag{Name: "order", Usage: "revoke the certificate of this order"},
			&cli.StringFlag{Name: "account", Usage: "revoke every unrevoked certificate of this account"},
			&cli.StringFlag{Name: "reason", Value: "unspecified", Usage: "RFC 5280 reason, by name or code"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be revoked and change nothing"},
			&cli.DurationFlag{Name: "wait", Usage: "for relay/custom certificates, wait this long for the backend's confirmation"},
			jsonFlag,
		},
		Action: withSession(revoke),
	}
}

func reasonList() string {
	var parts []string
	for _, r := range revocation.Allowed() {
		parts = append(parts, fmt.Sprintf("%d %s", int(r), r))
	}
	return strings.Join(parts, ", ")
}

// revokeRow is one certificate in revoke's output.
type revokeRow struct {
	Serial   string   `json:"serial"`
	Names    []string `json:"names"`
	Issuer   string   `json:"issuer"`
	Profile  string   `json:"profile"`
	Backend  string   `json:"backend"`
	NotAfter string   `json:"not_after"`
	// Outcome is would-revoke, revoked, queued, refused, already-revoked
	// or failed.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

type revokeReport struct {
	DryRun       bool        `json:"dry_run"`
	Target       string      `json:"target"`
	Reason       int         `json:"reason"`
	ReasonName   string      `json:"reason_name"`
	Actor        string      `json:"actor"`
	Certificates []revokeRow `json:"certificates"`
	// CRLQueued lists the issuers whose next CRL is queued by this run.
	CRLQueued []string `json:"crl_queued"`
}

func revoke(ctx context.Context, s *session, c *cli.Context) error {
	t := revocation.Target{Serial: normalSerial(c.String("serial")), OrderID: c.String("order"), AccountID: c.String("account")}
	if err := flagsFirst(c); err != nil {
		return err
	}
	if c.NArg() > 1 || (c.NArg() == 1 && t.Serial != "") {
		return usage("revoke takes one serial, as an argument or with --serial")
	}
	if c.NArg() == 1 {
		t.Serial = c.Args().First()
	}
	if t.Serial != "" {
		t.Serial = resolveSerial(ctx, s.st, t.Serial)
	}
	n := 0
	for _, v := range []string{t.Serial, t.OrderID, t.AccountID} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return usage("name exactly one of a serial, --order or --account to revoke")
	}
	reason, err := revocation.ParseReason(c.String("reason"))
	if err != nil {
		return exitErr(err)
	}
	run := &bulkRevoke{svc: revocation.New(s.st, s.cfg.Profiles), reason: reason, wait: c.Duration("wait"), crl: map[string]bool{},
		rep: revokeReport{DryRun: c.Bool("dry-run"), Target: t.String(), Reason: int(reason), ReasonName: reason.String(), Actor: operator.CLIActor(), Certificates: []revokeRow{}, CRLQueued: []string{}}}
	// A page at a time (revocation.Service.SelectPages): an account's
	// 20,000 certificates are never in memory at once, only their report
	// rows; and a page's local certificates are revoked in one
	// transaction, with one crl_generate job per issuer.
	selErr := run.svc.SelectPages(ctx, t, func(page []*store.Certificate) error {
		run.page(ctx, page)
		return nil
	})
	if selErr != nil && run.total == 0 {
		return exitErr(selErr)
	}
	rep := run.report()
	if s.json {
		if err := s.emit(rep); err != nil {
			return err
		}
	} else {
		printRevoke(s, rep)
	}
	return run.exit(t, selErr)
}

// bulkRevoke is one `hallmark revoke`: what it has done so far.
type bulkRevoke struct {
	svc    *revocation.Service
	reason revocation.Reason
	wait   time.Duration
	rep    revokeReport
	crl    map[string]bool // issuers whose next CRL a revocation queued

	total, failed, done int
	first               string // the serial of the first certificate
	firstErr            error
}

// page revokes a page of certificates (or says it would, or skips those
// revoked already) and adds their rows, in the page's order.
func (b *bulkRevoke) page(ctx context.Context, certs []*store.Certificate) {
	rows := make([]revokeRow, len(certs))
	var todo []*store.Certificate
	var at []int // the row of each of todo
	for i, cert := range certs {
		b.total++
		if b.total == 1 {
			b.first = cert.Serial
		}
		rows[i] = revokeRow{Serial: cert.Serial, Names: cert.Names, Issuer: cert.IssuerID, Profile: cert.Profile, Backend: b.svc.Backend(cert), NotAfter: when(cert.NotAfter)}
		switch {
		case cert.RevokedAt != nil && !revocation.ReportsKey(b.reason, cert):
			alreadyRevoked(&rows[i], cert)
		case b.rep.DryRun:
			rows[i].Outcome = "would-revoke"
			b.done++
		default:
			todo = append(todo, cert)
			at = append(at, i)
		}
	}
	if len(todo) > 0 {
		outs := b.svc.RevokeAll(ctx, todo, revocation.Request{Reason: b.reason, Actor: b.rep.Actor, Via: "hallmark revoke", Wait: b.wait})
		for j, o := range outs {
			b.record(&rows[at[j]], todo[j], o)
		}
	}
	b.rep.Certificates = append(b.rep.Certificates, rows...)
}

// record fills row with what revoking cert did. A certificate someone
// else revoked since the page was read is already-revoked, as one the page
// found revoked: it is neither done by this run nor a failure.
func (b *bulkRevoke) record(row *revokeRow, cert *store.Certificate, o revocation.Outcome) {
	switch {
	case errors.Is(o.Err, revocation.ErrRefused):
		row.Outcome, row.Error = "refused", exitErr(o.Err).Error()
		b.fail(o.Err)
	case errors.Is(o.Err, store.ErrConflict) && o.Certificate != nil && o.Certificate.RevokedAt != nil:
		alreadyRevoked(row, o.Certificate)
		if revocation.ReportsKey(b.reason, o.Certificate) {
			// A relay's or custom backend's: its reason stays, its key
			// was blocked, and the error says both.
			row.Error = exitErr(o.Err).Error()
		}
	case o.Err != nil:
		row.Outcome, row.Error = "failed", exitErr(o.Err).Error()
		b.fail(o.Err)
	case o.Remote && !o.Done:
		row.Outcome = "queued"
		b.done++
	default:
		row.Outcome = "revoked"
		if !o.Remote {
			b.crl[cert.IssuerID] = true
		}
		b.done++
	}
}

func (b *bulkRevoke) fail(err error) {
	if b.firstErr == nil {
		b.firstErr = err
	}
	b.failed++
}

// alreadyRevoked makes row say when and why cert was revoked.
func alreadyRevoked(row *revokeRow, cert *store.Certificate) {
	row.Outcome = "already-revoked"
	row.Error = fmt.Sprintf("revoked at %s with reason %s", when(*cert.RevokedAt), revocation.Reason(cert.RevocationReason))
}

// report is the run's report, its queued CRLs sorted.
func (b *bulkRevoke) report() revokeReport {
	for id := range b.crl {
		b.rep.CRLQueued = append(b.rep.CRLQueued, id)
	}
	sort.Strings(b.rep.CRLQueued)
	return b.rep
}

// exit is the run's exit: selErr is the error that stopped the selection
// part way (its pages are read as the run goes), if any.
func (b *bulkRevoke) exit(t revocation.Target, selErr error) error {
	switch {
	case selErr != nil:
		return cli.Exit(fmt.Sprintf("stopped after %d certificate(s) of %s: %v; run the command again: done ones are skipped", b.total, t, exitErr(selErr)), exitNothing)
	case b.total == 0:
		return cli.Exit(fmt.Sprintf("%s has no certificates; nothing to revoke", t), exitNothing)
	case b.failed > 0 && b.done == 0 && b.total == 1:
		return exitErr(b.firstErr)
	case b.failed > 0:
		return cli.Exit(fmt.Sprintf("%d of %d revocations failed (see above); fix the cause and run the command again: done ones are skipped", b.failed, b.failed+b.done), exitNothing)
	case b.done == 0 && b.total == 1:
		return cli.Exit(fmt.Sprintf("certificate %s is already revoked; nothing to do", b.first), exitNothing)
	case b.done == 0:
		return cli.Exit(fmt.Sprintf("every certificate of %s is already revoked; nothing to do", t), exitNothing)
	}
	return nil
}

func printRevoke(s *session, rep revokeReport) {
	verb := "revoking"
	if rep.DryRun {
		verb = "dry run: would revoke"
	}
	s.printf("%s %s with reason %d (%s) as %s\n", verb, rep.Target, rep.Reason, rep.ReasonName, rep.Actor)
	if len(rep.Certificates) == 0 {
		return
	}
	rows := make([][]string, len(rep.Certificates))
	for i, r := range rep.Certificates {
		note := r.Error
		rows[i] = []string{r.Serial, strings.Join(r.Names, ","), r.Backend, r.NotAfter, r.Outcome, orDash(note)}
	}
	s.table([]string{"SERIAL", "NAMES", "BACKEND", "NOT AFTER", "OUTCOME", "NOTE"}, rows)
	if rep.DryRun {
		s.printf("nothing was changed; run again without --dry-run to revoke\n")
		return
	}
	for _, id := range rep.CRLQueued {
		s.printf("the next CRL of issuer %s is queued and will list the revocation once a worker signs it\n", id)
	}
	for _, r := range rep.Certificates {
		if r.Outcome == "queued" {
			// `certs show` shows a revocation, never a refusal: the command
			// run again with --wait waits on the same job while it is
			// outstanding, or asks the backend again once it has answered.
			s.printf("certificate %s is queued for its %s backend, which has not answered yet; run `hallmark revoke --wait 30s %s` to wait for its answer (revoked, or refused and why)\n", r.Serial, r.Backend, r.Serial)
		}
	}
}

// normalSerial accepts a serial as openssl prints it (upper case, colons)
// and returns lower-case hex.
func normalSerial(s string) string {
	s = strings.ToLower(strings.NewReplacer(":", "", " ", "").Replace(strings.TrimSpace(s)))
	return strings.TrimPrefix(s, "0x")
}

// resolveSerial finds the stored form of a serial: signers differ on a
// leading zero nibble, so both the minimal and the whole-bytes form are
// tried. It returns s unchanged when neither exists.
func resolveSerial(ctx context.Context, st cliStore, s string) string {
	s = normalSerial(s)
	min := strings.TrimLeft(s, "0")
	for _, cand := range []string{s, min, "0" + min} {
		if cand == "" {
			continue
		}
		if _, err := st.CertificateBySerial(ctx, cand); err == nil {
			return cand
		}
	}
	return s
}

// certRow is a certificate as list and show print it.
type certRow struct {
	Serial    string     `json:"serial"`
	Names     []string   `json:"names"`
	Account   string     `json:"account"`
	Order     string     `json:"order"`
	Issuer    string     `json:"issuer"`
	Profile   string     `json:"profile"`
	NotBefore time.Time  `json:"not_before"`
	NotAfter  time.Time  `json:"not_after"`
	IssuedAt  time.Time  `json:"issued_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Reason    *int       `json:"revocation_reason,omitempty"`
	ReasonStr string     `json:"revocation_reason_name,omitempty"`
}

func certRowOf(c *store.Certificate) certRow {
	r := certRow{Serial: c.Serial, Names: c.Names, Account: c.AccountID, Order: c.OrderID, Issuer: c.IssuerID, Profile: c.Profile,
		NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), IssuedAt: c.IssuedAt.UTC()}
	if r.Names == nil {
		r.Names = []string{}
	}
	if c.RevokedAt != nil {
		at := c.RevokedAt.UTC()
		reason := c.RevocationReason
		r.RevokedAt, r.Reason, r.ReasonStr = &at, &reason, revocation.Reason(reason).String()
	}
	return r
}
