package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// TestAuditVerify: `hallmark audit verify` passes while accounts are
// created, certificates issued and revoked (the trail's and the operators'
// chains both growing), then exits 7 naming the row altered directly in SQL,
// and the gap where a row was deleted. `audit export` prints every row as
// one JSON line with its place in its chain.
func TestAuditVerify(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			ctx := context.Background()
			a := c.account()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the busy CA: the trail and revocations
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						if i >= 30 {
							return
						}
					default:
					}
					serial := fmt.Sprintf("b%04x", i)
					ev := store.AuditEvent{Actor: "worker:w1", Action: store.ActionCertificateIssued, Subject: serial, Trail: true,
						Origin: origin.Origin{RequestID: "r" + serial, ClientAddr: "192.0.2.9", UserAgent: "lego/4"}}
					o := c.processing(a, serial+".example.com")
					now, _ := c.st().Now(ctx)
					in := store.Issued{OrderID: o.ID, Trail: &ev, Certificate: store.Certificate{Serial: serial, IssuerID: "issuer-1", Profile: "default",
						DER: []byte{0x30, 0x01}, ChainPEM: []byte("x"), Names: []string{serial + ".example.com"}, NotBefore: now, NotAfter: now.AddDate(0, 0, 90)}}
					if err := c.st().OrderIssued(ctx, in); err != nil {
						t.Error(err)
						return
					}
					if i%3 == 0 {
						if _, err := c.st().Revoke(ctx, serial, 4, store.AuditEvent{Actor: "cli:busy", Action: "revoke", Subject: serial}); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
			for range 3 {
				c.want(0, "audit", "verify")
			}
			close(stop)
			wg.Wait()
			var rep struct {
				OK   bool  `json:"ok"`
				Rows int64 `json:"rows"`
			}
			c.jsonOf(&rep, 0, "audit", "verify", "--json")
			total := c.sqlInt(`SELECT count(*) FROM audit_events`)
			if !rep.OK || rep.Rows != total || total < 4 {
				t.Fatalf("audit verify = %+v, want ok over all %d rows", rep, total)
			}

			r := c.want(0, "audit", "export")
			lines, seqs := 0, map[bool]int64{}
			sc := bufio.NewScanner(strings.NewReader(r.stdout))
			for sc.Scan() {
				var row struct {
					Trail bool   `json:"trail"`
					Seq   int64  `json:"seq"`
					Hash  string `json:"hash"`
				}
				if err := json.Unmarshal(sc.Bytes(), &row); err != nil || len(row.Hash) != 64 {
					t.Fatalf("export line %q: %v", sc.Text(), err)
				}
				seqs[row.Trail] = max(seqs[row.Trail], row.Seq)
				lines++
			}
			if int64(lines) != total || seqs[true]+seqs[false] != total {
				t.Fatalf("export printed %d lines with seqs %v, want %d", lines, seqs, total)
			}

			victim := c.sqlInt(`SELECT id FROM audit_events WHERE trail ORDER BY seq LIMIT 1 OFFSET 1`)
			c.sqlInt(fmt.Sprintf(`UPDATE audit_events SET subject = 'forged' WHERE id = %d`, victim))
			r = c.want(7, "audit", "verify")
			if want := fmt.Sprintf("(audit event %d)", victim); !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "altered") {
				t.Fatalf("verify after an UPDATE: %s; want it to name %s as altered", r.stderr, want)
			}
			c.sqlInt(fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, victim))
			r = c.want(7, "audit", "verify")
			if !strings.Contains(r.stderr, "the trail's chain breaks at seq 2") || !strings.Contains(r.stderr, "missing") {
				t.Fatalf("verify after a DELETE: %s; want the missing seq 2", r.stderr)
			}
		})
	}
}
