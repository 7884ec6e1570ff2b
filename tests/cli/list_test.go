package cli

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestListLimitAboveOnePage: the store returns at most 1000 rows a call;
// a --limit above that follows its cursor, so --limit 1500 over 1001
// records prints all 1001 (it printed 1000 and said nothing), newest first,
// none twice, and --limit still bounds the rows below and above a page.
func TestListLimitAboveOnePage(t *testing.T) {
	t.Parallel()
	c := newCA(t, testdb.SQLite(t))
	const n = 1001
	var accounts []string
	for range n {
		accounts = append(accounts, c.account().ID)
	}
	// One issued certificate (and so one order) per account, for `orders
	// list` and `certs list`.
	var orders, certs []string
	for i, a := range accounts {
		serial := fmt.Sprintf("%04x", 0x1000+i)
		orders = append(orders, c.issued(&store.Account{ID: a}, fmt.Sprintf("n%d.example.com", i), serial).ID)
		certs = append(certs, serial)
	}
	slices.Reverse(accounts) // newest first
	slices.Reverse(orders)
	slices.Reverse(certs)
	for _, tc := range []struct {
		list  string
		limit int
		want  []string
	}{
		{"accounts", 1500, accounts},
		{"accounts", 1001, accounts},
		{"accounts", 1000, accounts[:1000]},
		{"accounts", 7, accounts[:7]},
		{"orders", 1500, orders},
		{"orders", 1000, orders[:1000]},
		{"certs", 1500, certs},
		{"certs", 1000, certs[:1000]},
	} {
		t.Run(fmt.Sprintf("%s list --limit %d", tc.list, tc.limit), func(t *testing.T) {
			var rows []struct{ ID, Serial string }
			c.jsonOf(&rows, 0, tc.list, "list", "--json", "--limit", fmt.Sprint(tc.limit))
			got := make([]string, len(rows))
			for i, r := range rows {
				got[i] = r.ID + r.Serial
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("%s list --limit %d printed %d rows, want the newest %d in order", tc.list, tc.limit, len(got), len(tc.want))
			}
		})
	}
}
