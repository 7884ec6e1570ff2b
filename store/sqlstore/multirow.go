package sqlstore

import (
	"strconv"
	"strings"
	"sync"
)

// maxRowsPerStatement bounds a multi-row INSERT or an IN list. A few
// hundred parameters stay far below both dialects' limits (PostgreSQL
// 65535, SQLite 32766), and with one statement text per row count the
// dialect's and the driver's statement caches stay small.
const maxRowsPerStatement = 100

// queueRows queues head VALUES row, row, ... tail on b: one INSERT for up
// to maxRowsPerStatement rows, and the batch sends them all in one round
// trip. row is one parenthesized group whose placeholders $1..$k take the
// k values of one element of rows; each group is renumbered to follow the
// previous one. Nothing but placeholders enters the statement text. what
// says what the rows are, for an error.
func queueRows(b *batch, what, head, row, tail string, rows [][]any) {
	for len(rows) > 0 {
		n := min(len(rows), maxRowsPerStatement)
		args := make([]any, 0, n*len(rows[0]))
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		b.exec(what, head+" VALUES "+valueRows(row, len(rows[0]), n)+tail, args...)
		rows = rows[n:]
	}
}

type valuesKey struct {
	row  string
	k, n int
}

var valuesCache sync.Map // valuesKey → string

// valueRows repeats row n times, renumbering its placeholders $1..$k for
// each copy.
func valueRows(row string, k, n int) string {
	key := valuesKey{row, k, n}
	if v, ok := valuesCache.Load(key); ok {
		return v.(string)
	}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(placeholderRE.ReplaceAllStringFunc(row, func(p string) string {
			j, _ := strconv.Atoi(p[1:])
			return "$" + strconv.Itoa(i*k+j)
		}))
	}
	valuesCache.Store(key, b.String())
	return b.String()
}

// paramList is "$1, $2, ..., $n", for an IN list.
func paramList(n int) string {
	return valueRows("$1", 1, n)
}
