package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// TestOrderPagePerspectives: an order's page shows each network
// perspective's answer under the challenge it corroborated, and none for
// a challenge no perspective checked.
func TestOrderPagePerspectives(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	c := &http.Client{CheckRedirect: noRedirect}
	checked, plain := pendingOrder(t, st, "checked", "checked.example.com"), pendingOrder(t, st, "plain", "plain.example.com")
	az, err := st.AuthzByID(ctx, checked.AuthzIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	ch := az.Challenges[0].ID
	if _, err := st.PerspectivesAsk(ctx, store.PerspectiveAnswer{ChallengeID: ch, Perspective: store.PerspectivePrimary, Outcome: store.PerspectiveValid, Took: time.Millisecond}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.PerspectiveAnswer(ctx, store.PerspectiveAnswer{ChallengeID: ch, Perspective: "east", Outcome: store.PerspectiveInvalid, Took: 40 * time.Millisecond,
		Problem: &acme.Problem{Type: acme.ProblemUnauthorized, Detail: "the key authorization at 127.0.0.2 is another account's"}}); err != nil {
		t.Fatal(err)
	}
	_, page := do(t, c, "GET", srv.URL+"/orders/"+checked.ID, "Bearer "+token, nil)
	for _, w := range []string{"network perspective", "primary", "east", "the key authorization at 127.0.0.2 is another account&#39;s", "40ms"} {
		if !strings.Contains(page, w) {
			t.Errorf("the order page lacks %q", w)
		}
	}
	if _, page := do(t, c, "GET", srv.URL+"/orders/"+plain.ID, "Bearer "+token, nil); strings.Contains(page, "network perspective") {
		t.Errorf("an order no perspective checked shows a perspectives table")
	}
}
