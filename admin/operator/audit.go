package operator

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// AuditLine is an audit event as `hallmark audit list --json`, `audit
// export` and the admin API's audit endpoints write it.
type AuditLine struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Action     string    `json:"action"`
	Subject    string    `json:"subject"`
	Detail     string    `json:"detail"`
	Trail      bool      `json:"trail"`
	RequestID  string    `json:"request_id,omitempty"`
	ClientAddr string    `json:"client_addr,omitempty"`
	PTR        string    `json:"ptr,omitempty"`
	UserAgent  string    `json:"user_agent,omitempty"`
	Seq        int64     `json:"seq,omitempty"`
	PrevHash   string    `json:"prev_hash,omitempty"`
	Hash       string    `json:"hash,omitempty"`
}

// AuditLineOf is e as an AuditLine.
func AuditLineOf(e store.AuditEvent) AuditLine {
	o := e.Origin
	return AuditLine{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Subject: e.Subject, Detail: e.Detail,
		Trail: e.Trail, RequestID: o.RequestID, ClientAddr: o.ClientAddr, PTR: o.PTR, UserAgent: o.UserAgent,
		Seq: e.Seq, PrevHash: e.PrevHash, Hash: e.Hash}
}

// AuditReader is what exporting the audit log reads.
type AuditReader interface {
	AuditAfter(ctx context.Context, afterID int64, limit int) ([]store.AuditEvent, error)
}

// exportPage is how many events ExportAudit reads at a time.
const exportPage = 1000

// ExportAudit writes every event with an id above after to w as one JSON
// object a line, oldest first, each with its place in its chain: what a
// SIEM ingests. It returns the id of the last event written (after when
// none).
func ExportAudit(ctx context.Context, st AuditReader, after int64, w io.Writer) (int64, error) {
	enc := json.NewEncoder(w)
	for {
		evs, err := st.AuditAfter(ctx, after, exportPage)
		if err != nil {
			return after, err
		}
		for _, e := range evs {
			if err := enc.Encode(AuditLineOf(e)); err != nil {
				return after, err
			}
			after = e.ID
		}
		if len(evs) < exportPage {
			return after, nil
		}
	}
}
