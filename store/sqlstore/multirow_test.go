package sqlstore

import "testing"

func TestValueRows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		row  string
		k, n int
		want string
	}{
		{"($1, $2, {now})", 2, 1, "($1, $2, {now})"},
		{"($1, $2, {now})", 2, 3, "($1, $2, {now}), ($3, $4, {now}), ($5, $6, {now})"},
		{"$1", 1, 4, "$1, $2, $3, $4"},
	} {
		if got := valueRows(tc.row, tc.k, tc.n); got != tc.want {
			t.Errorf("valueRows(%q, %d, %d) = %q, want %q", tc.row, tc.k, tc.n, got, tc.want)
		}
	}
	if got := SQLite.SQL(valueRows("($1, $2)", 2, 2)); got != "(?1, ?2), (?3, ?4)" {
		t.Errorf("SQLite expands the rows to %q", got)
	}
}
