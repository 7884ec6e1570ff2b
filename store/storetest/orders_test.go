package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testOrderHappyPath: an order created, its authorizations validated,
// finalized once and issued, each step as the store must record it.
func testOrderHappyPath(t *testing.T, s store.Store, x Extras) {
	a := newAccount(t, s)
	o := happyOrderCreated(t, s, a)
	happyOrderValidated(t, s, o)
	happyOrderFinalized(t, s, x, o)
	happyOrderIssued(t, s, x, a, o)
}

// happyOrderCreated: an order of two names, one a wildcard, is pending
// with an authorization a name, each with two challenges of distinct
// tokens.
func happyOrderCreated(t *testing.T, s store.Store, a *store.Account) *store.Order {
	ctx := ctxT(t)
	spec := orderSpec(t, s, a, "a.example.com", "*.b.example.com")
	nb := spec.Expires.Add(-30 * time.Minute).Truncate(time.Second)
	spec.NotBefore = &nb
	o, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != acme.StatusPending || len(o.AuthzIDs) != 2 || len(o.ID) < 22 || o.NotBefore == nil || !o.NotBefore.Equal(nb) || o.NotAfter != nil {
		t.Fatalf("created order = %+v", o)
	}
	if !slices.Equal(o.Identifiers, spec.Identifiers) {
		t.Fatalf("identifiers = %v, want %v", o.Identifiers, spec.Identifiers)
	}
	if ids, _, err := s.OrdersByAccount(ctx, a.ID, store.Page{}); err != nil || !slices.Equal(ids, []string{o.ID}) {
		t.Fatalf("OrdersByAccount = %v, %v", ids, err)
	}
	az := authz(t, s, o.AuthzIDs[1])
	if az.Identifier.Value != "b.example.com" || !az.Wildcard || az.Status != acme.StatusPending || az.AccountID != a.ID || len(az.Challenges) != 2 {
		t.Fatalf("wildcard authorization = %+v", az)
	}
	tokens := map[string]bool{}
	for _, c := range az.Challenges {
		// RFC 8555 §8.1: a token has at least 128 bits of entropy, base64url.
		if len(c.Token) < 22 || strings.ContainsAny(c.Token, "+/=") || c.Status != acme.StatusPending || c.AuthzID != az.ID {
			t.Fatalf("challenge = %+v", c)
		}
		tokens[c.Token] = true
	}
	if len(tokens) != 2 {
		t.Fatal("two challenges share a token")
	}
	return o
}

// happyOrderValidated: with the first authorization valid the order waits
// for the second, then is ready.
func happyOrderValidated(t *testing.T, s store.Store, o *store.Order) {
	c := validate(t, s, o.AuthzIDs[0], acme.StatusValid)
	if got := challenge(t, s, c.ID); got.Status != acme.StatusValid || got.Validated == nil || string(got.ValidationRecord) == "" {
		t.Fatalf("validated challenge = %+v", got)
	}
	if got := order(t, s, o.ID); got.Status != acme.StatusPending {
		t.Fatalf("order is %s with one of two authorizations valid, want pending", got.Status)
	}
	validate(t, s, o.AuthzIDs[1], acme.StatusValid)
	if got := order(t, s, o.ID); got.Status != acme.StatusReady {
		t.Fatalf("order is %s with every authorization valid, want ready", got.Status)
	}
}

// happyOrderFinalized: a finalize claims the ready order and queues its
// signer_issue job once.
func happyOrderFinalized(t *testing.T, s store.Store, x Extras, o *store.Order) {
	ctx := ctxT(t)
	// Naming another profile than the order's claims nothing and queues
	// nothing: the job would have gone to that profile's workers.
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile+"-other", []byte("csr-der"), nil); err == nil || claimed {
		t.Fatalf("finalize naming another profile: claimed=%v err=%v, want an error", claimed, err)
	}
	if got := order(t, s, o.ID); got.Status != acme.StatusReady || got.CSR != nil {
		t.Fatalf("order is %s (csr %q) after a finalize naming another profile, want ready with no CSR", got.Status, got.CSR)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 0 {
		t.Fatalf("%d signer_issue jobs after a finalize naming another profile, want 0", n)
	}
	got, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr-der"), nil)
	if err != nil || !claimed || got.Status != acme.StatusProcessing || string(got.CSR) != "csr-der" {
		t.Fatalf("OrderFinalizeBegin = %+v, %v, %v", got, claimed, err)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 1 {
		t.Fatalf("%d signer_issue jobs after finalize, want 1", n)
	}
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("again"), nil); err != nil || claimed {
		t.Fatalf("second finalize: claimed=%v err=%v, want not claimed", claimed, err)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 1 {
		t.Fatalf("%d signer_issue jobs after a repeated finalize, want still 1", n)
	}
}

// happyOrderIssued: the issued order is valid with its certificate
// recorded, and stays so.
func happyOrderIssued(t *testing.T, s store.Store, x Extras, a *store.Account, o *store.Order) {
	ctx := ctxT(t)
	now := dbNow(t, s)
	err := s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: "0a1b2c", IssuerID: "issuer-1", DER: []byte{0x30}, ChainPEM: []byte("pem"),
		Names: []string{"a.example.com", "*.b.example.com"}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
	}})
	if err != nil {
		t.Fatalf("OrderIssued: %v", err)
	}
	// The verdict leaves its job to River, which completes it after the
	// handler returns.
	if n := jobsIn(t, x, jobs.KindSignerIssue, "available"); n != 1 {
		t.Fatalf("%d available signer_issue jobs after OrderIssued, want 1: the store must not touch the job", n)
	}
	got := order(t, s, o.ID)
	if got.Status != acme.StatusValid || got.CertSerial != "0a1b2c" {
		t.Fatalf("issued order = %+v", got)
	}
	cert, err := s.CertificateBySerial(ctx, "0a1b2c")
	if err != nil || cert.OrderID != o.ID || cert.AccountID != a.ID || cert.Profile != "default" || cert.IssuedAt.IsZero() ||
		!slices.Equal(cert.Names, []string{"a.example.com", "*.b.example.com"}) || cert.RevokedAt != nil {
		t.Fatalf("certificate = %+v, %v", cert, err)
	}
	// A verdict is terminal: the order never goes back.
	wantErr(t, "OrderFail on a valid order", s.OrderFail(ctx, o.ID, acme.Problem{Type: acme.ProblemBadCSR}), store.ErrConflict)
}

// testIssueLapsed: an order processing whose account or one of whose
// authorizations is no longer valid, though the order was left processing
// (on PostgreSQL, a deactivation whose statements ran before the order was
// committed; set here directly, as that leaves it), is read by
// OrderToIssue with the problem to fail it with, and OrderIssued records
// no certificate for it: ErrUnauthorized, the order still processing for
// the worker to fail. Born valid (pre-validated) or validated, alike.
func testIssueLapsed(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	cases := []struct {
		name      string
		bornValid bool
		lapse     func(o *store.Order) string // a statement that makes it lapse; nil for none
		detail    string                      // in the problem's detail; "" for none
	}{
		{"nothing lapsed", false, nil, ""},
		{"nothing lapsed, born valid", true, nil, ""},
		{"account deactivated", false, func(o *store.Order) string {
			return "UPDATE accounts SET status = 'deactivated' WHERE id = '" + o.AccountID + "'"
		}, "the account is deactivated"},
		{"account deactivated, born valid", true, func(o *store.Order) string {
			return "UPDATE accounts SET status = 'deactivated' WHERE id = '" + o.AccountID + "'"
		}, "the account is deactivated"},
		{"an authorization deactivated", false, func(o *store.Order) string {
			return "UPDATE authorizations SET status = 'deactivated' WHERE id = '" + o.AuthzIDs[1] + "'"
		}, "is no longer valid"},
		{"an authorization deactivated, born valid", true, func(o *store.Order) string {
			return "UPDATE authorizations SET status = 'deactivated' WHERE id = '" + o.AuthzIDs[0] + "'"
		}, "is no longer valid"},
		// Valid, but past its expiry (a dns-persist-01 record's persistUntil
		// brought it before the order's).
		{"an authorization expired", false, func(o *store.Order) string {
			return "UPDATE authorizations SET expires_at = created_at WHERE id = '" + o.AuthzIDs[1] + "'"
		}, "is no longer valid"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccount(t, s)
			names := []string{fmt.Sprintf("lapse%d-a.example.com", i), fmt.Sprintf("lapse%d-b.example.com", i)}
			var o *store.Order
			if tc.bornValid {
				spec := orderSpec(t, s, a, names...)
				for _, az := range spec.Authzs {
					az.Status, az.Challenges = acme.StatusValid, nil
				}
				var err error
				if o, err = s.OrderCreate(ctx, store.SignedUse{}, spec); err != nil || o.Status != acme.StatusReady {
					t.Fatalf("born valid order: %+v, %v; want ready", o, err)
				}
			} else {
				o = readyOrder(t, s, a, names...)
			}
			if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
				t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
			}
			o = order(t, s, o.ID)
			if tc.lapse != nil {
				x.Exec(t, tc.lapse(o))
			}
			got, err := s.OrderToIssue(ctx, o.ID, time.Hour)
			if err != nil || got.Order.Status != acme.StatusProcessing {
				t.Fatalf("OrderToIssue = %+v, %v; want the processing order", got, err)
			}
			switch {
			case tc.detail == "" && got.Lapsed != nil:
				t.Fatalf("OrderToIssue: lapsed %+v, want nothing lapsed", got.Lapsed)
			case tc.detail != "" && (got.Lapsed == nil || got.Lapsed.Type != acme.ProblemUnauthorized || !strings.Contains(got.Lapsed.Detail, tc.detail)):
				t.Fatalf("OrderToIssue: lapsed %+v, want unauthorized saying %q", got.Lapsed, tc.detail)
			}
			serial := fmt.Sprintf("1a5e%d", i)
			err = issue(t, s, o, serial)
			if tc.detail == "" {
				if err != nil {
					t.Fatalf("OrderIssued: %v", err)
				}
				return
			}
			wantErr(t, "OrderIssued of a lapsed order", err, store.ErrUnauthorized)
			if got := order(t, s, o.ID); got.Status != acme.StatusProcessing || got.CertSerial != "" {
				t.Fatalf("order after the refused OrderIssued: %s, serial %q; want processing, none", got.Status, got.CertSerial)
			}
			_, err = s.CertificateBySerial(ctx, serial)
			wantErr(t, "the refused certificate", err, store.ErrNotFound)
		})
	}
}

// testStaleValidations: an order's validated authorizations count as
// stale once their challenge's validation is older than the age asked
// for, on the database clock, in the order's position order.
func testStaleValidations(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "stale.example.com", "*.wild.example.com", "pending.example.com")
	var methods []acme.ChallengeType
	for _, id := range o.AuthzIDs[:2] {
		methods = append(methods, validate(t, s, id, acme.StatusValid).Type)
	}
	if got, err := s.StaleValidations(ctx, o.ID, time.Hour); err != nil || len(got) != 0 {
		t.Fatalf("StaleValidations(1h) right after validating = %+v, %v; want none", got, err)
	}
	if got, err := s.OrderToIssue(ctx, o.ID, time.Hour); err != nil || got.Stale || got.Order.ID != o.ID || len(got.Order.AuthzIDs) != 3 {
		t.Fatalf("OrderToIssue(1h) right after validating = %+v, %v; want the order, nothing stale", got, err)
	}
	time.Sleep(20 * time.Millisecond)
	if got, err := s.OrderToIssue(ctx, o.ID, 5*time.Millisecond); err != nil || !got.Stale {
		t.Fatalf("OrderToIssue(5ms) = %+v, %v; want stale", got, err)
	}
	// An order with nothing validated has nothing stale.
	pending := newOrder(t, s, a, "nothing.example.com")
	if got, err := s.OrderToIssue(ctx, pending.ID, 5*time.Millisecond); err != nil || got.Stale {
		t.Fatalf("OrderToIssue(5ms) of an order with nothing validated = %+v, %v; want not stale", got, err)
	}
	_, err := s.OrderToIssue(ctx, "no-such-order", time.Hour)
	wantErr(t, "OrderToIssue of no order", err, store.ErrNotFound)
	got, err := s.StaleValidations(ctx, o.ID, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.StaleValidation{
		{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "stale.example.com"}, Method: methods[0]},
		{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "wild.example.com"}, Wildcard: true, Method: methods[1]},
	}
	if len(got) != len(want) {
		t.Fatalf("StaleValidations(5ms) = %+v, want the two validated authorizations", got)
	}
	for i := range want {
		if got[i].Identifier != want[i].Identifier || got[i].Wildcard != want[i].Wildcard || got[i].Method != want[i].Method || got[i].Validated.IsZero() {
			t.Errorf("StaleValidations(5ms)[%d] = %+v, want %+v with its time", i, got[i], want[i])
		}
	}
}

func testOrderFail(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "fail.example.com")
	wantErr(t, "OrderFail on a ready order", s.OrderFail(ctx, o.ID, acme.Problem{Type: acme.ProblemBadCSR}), store.ErrConflict)
	if _, _, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.OrderFail(ctx, o.ID, acme.Problem{Type: acme.ProblemBadCSR, Detail: "key too small"}); err != nil {
		t.Fatalf("OrderFail: %v", err)
	}
	got := order(t, s, o.ID)
	if got.Status != acme.StatusInvalid || got.Error == nil || got.Error.Detail != "key too small" {
		t.Fatalf("failed order = %s %+v", got.Status, got.Error)
	}
	// A backend's rejection is terminal: never ready again.
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || claimed {
		t.Fatalf("finalizing a failed order: claimed=%v err=%v", claimed, err)
	}
}

func testOrdersList(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a, b := newAccount(t, s), newAccount(t, s)
	o1 := newOrder(t, s, a, "list1.example.com")
	o2 := readyOrder(t, s, a, "list2.example.com")
	o3 := newOrder(t, s, b, "list1.example.com")
	ids := func(f store.OrderFilter) []string {
		t.Helper()
		list, _, err := s.OrdersList(ctx, f, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range list {
			if len(o.AuthzIDs) == 0 {
				t.Errorf("listed order %s has no authorizations", o.ID)
			}
			out = append(out, o.ID)
		}
		return out
	}
	for name, tc := range map[string]struct {
		f    store.OrderFilter
		want []string
	}{
		"all":        {store.OrderFilter{}, []string{o3.ID, o2.ID, o1.ID}},
		"account":    {store.OrderFilter{AccountID: a.ID}, []string{o2.ID, o1.ID}},
		"identifier": {store.OrderFilter{Identifier: "list1.example.com"}, []string{o3.ID, o1.ID}},
		"status":     {store.OrderFilter{Status: acme.StatusReady}, []string{o2.ID}},
		"combined":   {store.OrderFilter{AccountID: b.ID, Status: acme.StatusReady}, nil},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("OrdersList %s = %v, want %v", name, got, tc.want)
		}
	}
}
