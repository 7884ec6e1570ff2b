package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// The audit log is two hash chains: the operators' and system actions
// (Trail false, kept for good) and the issuance trail (Trail true, pruned
// oldest first, which moves the chain's base). The database appends every
// inserted row to its chain in the inserting transaction (migration 0023):
// its Seq, the previous row's hash and its own, the SHA-256 of
// AuditPreimage.

// ActionAuditPrune is the operators' chain's record of each pruning of the
// trail: the seq and hash its base moved to (PruneDetail), so a trail
// whose first rows were deleted otherwise shows.
const ActionAuditPrune = "audit.prune"

// PruneDetail is an audit.prune event's detail for a base moved to seq.
func PruneDetail(seq int64, hash string) string {
	return fmt.Sprintf("trail events to seq %d deleted (audit.retention_days); base %s", seq, hash)
}

// GenesisHash is what the first row of a chain follows.
var GenesisHash = strings.Repeat("0", 64)

// AuditPreimage is the text a row's hash covers; the migration's SQL
// builds the same bytes (audit_preimage on PostgreSQL, the trigger on
// SQLite). Each text field is prefixed by its length in bytes, so no
// content can shift a boundary.
func AuditPreimage(ev AuditEvent) string {
	var b strings.Builder
	b.WriteString("hallmark-audit-v1\n")
	b.WriteString(ev.PrevHash + "\n")
	b.WriteString(strconv.FormatInt(ev.Seq, 10) + "\n")
	if ev.Trail {
		b.WriteString("1\n")
	} else {
		b.WriteString("0\n")
	}
	b.WriteString(strconv.FormatInt(ev.At.UnixMicro(), 10) + "\n")
	o := ev.Origin
	for _, f := range []string{ev.Actor, ev.Action, ev.Subject, ev.Detail, o.RequestID, o.ClientAddr, o.PTR, o.UserAgent} {
		b.WriteString(strconv.Itoa(len(f)) + ":" + f + "\n")
	}
	return b.String()
}

// AuditHash is the hash a chained row must carry.
func AuditHash(ev AuditEvent) string {
	sum := sha256.Sum256([]byte(AuditPreimage(ev)))
	return hex.EncodeToString(sum[:])
}

// AuditHead is a chain's state: its last row and its base (what its
// first kept row follows).
type AuditHead struct {
	Trail    bool
	Seq      int64
	Hash     string
	BaseSeq  int64
	BaseHash string
}

// AuditChain is what verifying the chains reads.
type AuditChain interface {
	// AuditHeads reads both chains' heads in one statement.
	AuditHeads(ctx context.Context) (operators, trail AuditHead, err error)
	// AuditChainRows returns up to limit rows of one chain with Seq
	// after after and at most upTo, in Seq order.
	AuditChainRows(ctx context.Context, trail bool, after, upTo int64, limit int) ([]AuditEvent, error)
	// AuditUnchained counts the rows recorded before the chain existed.
	AuditUnchained(ctx context.Context) (int64, error)
	// AuditLastPrune is the newest audit.prune event; false when none.
	AuditLastPrune(ctx context.Context) (AuditEvent, bool, error)
}

// AuditBreak is the first broken link of a chain.
type AuditBreak struct {
	Trail bool
	Seq   int64 // the place where the chain breaks
	ID    int64 // the row there, 0 when it is missing
	Why   string
}

func (b AuditBreak) Error() string {
	chain := "operators'"
	if b.Trail {
		chain = "trail's"
	}
	if b.ID == 0 {
		return fmt.Sprintf("the %s chain breaks at seq %d: %s", chain, b.Seq, b.Why)
	}
	return fmt.Sprintf("the %s chain breaks at seq %d (audit event %d): %s", chain, b.Seq, b.ID, b.Why)
}

// AuditReport is what VerifyAudit found.
type AuditReport struct {
	Operators, Trail AuditHead // the heads verified up to
	Rows             int64     // chained rows checked
	Unchained        int64     // rows recorded before migration 0023
	Break            *AuditBreak
}

// auditPage is how many rows VerifyAudit reads at a time.
const auditPage = 1000

// VerifyAudit checks both chains up to the heads it reads first, so rows
// appended meanwhile do not disturb it: every row from the base to the head
// must be present, follow the row before it and carry its own hash. The
// first broken link is in the report's Break; err is a failed read.
func VerifyAudit(ctx context.Context, st AuditChain) (AuditReport, error) {
	var rep AuditReport
	var err error
	if rep.Unchained, err = st.AuditUnchained(ctx); err != nil {
		return rep, err
	}
	for attempt := 0; ; attempt++ {
		if rep.Operators, rep.Trail, err = st.AuditHeads(ctx); err != nil {
			return rep, err
		}
		rep.Rows = 0
		brk, err := checkBase(ctx, st, rep.Trail)
		if err != nil {
			return rep, err
		}
		for _, h := range []AuditHead{rep.Operators, rep.Trail} {
			if brk != nil {
				break
			}
			n, b, err := verifyChain(ctx, st, h)
			rep.Rows += n
			if err != nil {
				return rep, err
			}
			if b != nil {
				brk = b
				break
			}
		}
		if brk == nil {
			return rep, nil
		}
		// The trail pruned meanwhile moves its base: read the heads again.
		if _, t, err := st.AuditHeads(ctx); err == nil && t.BaseSeq != rep.Trail.BaseSeq && attempt < 3 {
			continue
		}
		rep.Break = brk
		return rep, nil
	}
}

// checkBase compares the trail's base with what the newest audit.prune
// event recorded: a base moved without one means rows were deleted from
// the trail's start other than by pruning.
func checkBase(ctx context.Context, st AuditChain, trail AuditHead) (*AuditBreak, error) {
	ev, ok, err := st.AuditLastPrune(ctx)
	if err != nil {
		return nil, err
	}
	if (trail.BaseSeq == 0 && !ok) || (ok && ev.Detail == PruneDetail(trail.BaseSeq, trail.BaseHash)) {
		return nil, nil
	}
	return &AuditBreak{Trail: true, Seq: trail.BaseSeq, Why: "the trail's base is not where its last recorded pruning left it (rows deleted from its start)"}, nil
}

func verifyChain(ctx context.Context, st AuditChain, h AuditHead) (int64, *AuditBreak, error) {
	seq, prev := h.BaseSeq, h.BaseHash
	var n int64
	for seq < h.Seq {
		rows, err := st.AuditChainRows(ctx, h.Trail, seq, h.Seq, auditPage)
		if err != nil {
			return n, nil, err
		}
		if len(rows) == 0 {
			return n, &AuditBreak{Trail: h.Trail, Seq: seq + 1, Why: fmt.Sprintf("rows %d to %d are missing (deleted), though the chain's head is at %d", seq+1, h.Seq, h.Seq)}, nil
		}
		for _, ev := range rows {
			switch {
			case ev.Seq != seq+1:
				return n, &AuditBreak{Trail: h.Trail, Seq: seq + 1, Why: fmt.Sprintf("rows %d to %d are missing (deleted)", seq+1, ev.Seq-1)}, nil
			case ev.PrevHash != prev:
				return n, &AuditBreak{Trail: h.Trail, Seq: ev.Seq, ID: ev.ID, Why: "it does not follow the row before it (its prev_hash differs from that row's hash)"}, nil
			case AuditHash(ev) != ev.Hash:
				return n, &AuditBreak{Trail: h.Trail, Seq: ev.Seq, ID: ev.ID, Why: "its content does not match its hash (altered)"}, nil
			}
			seq, prev = ev.Seq, ev.Hash
			n++
		}
	}
	if prev != h.Hash {
		return n, &AuditBreak{Trail: h.Trail, Seq: h.Seq, Why: "the last row's hash is not the chain head's (altered)"}, nil
	}
	return n, nil, nil
}

// Audited are the operators' actions that record their audit event in
// their own transaction: the change and its row commit together or not at
// all.
type Audited interface {
	AuditChain
	// AuditAfter returns up to limit events with an ID above after,
	// oldest first (`hallmark audit export`).
	AuditAfter(ctx context.Context, after int64, limit int) ([]AuditEvent, error)
	// AccountDeactivateAudited is AccountDeactivate with ev recorded in
	// its transaction when it deactivates the account.
	AccountDeactivateAudited(ctx context.Context, id string, ev AuditEvent) (*Account, error)
	// JobAudited runs do in one transaction, which do sees as a JobTx
	// (River's side of it, for a job's retry or cancel, and a subject's
	// abandon), and records the event do returns there; an error from do
	// rolls everything back and records nothing.
	JobAudited(ctx context.Context, do func(ctx context.Context, tx JobTx) (AuditEvent, error)) error
}

// JobTx is a store transaction as an operator's job action sees it.
type JobTx interface {
	// Jobs is the transaction as River takes it (jobs.RetryTx, CancelTx).
	Jobs() jobs.Tx
	// Abandon is Store.Abandon in this transaction.
	Abandon(ctx context.Context, sub jobs.Subject, p acme.Problem) (bool, error)
}
