package sqlite

import "strings"

// SQLite plans a statement with the value bound to a bare "LIMIT ?N" when
// it prepares it, and marks that parameter so that binding a different
// value makes the next step parse and plan the statement again. River's
// job fetch (JobGetAvailable) binds the room its queue has, which changes
// on nearly every fetch, so its cached statement (driver.go) would be
// compiled again each time: about 190 µs a fetch instead of 17
// (BenchmarkRebindLimit).
//
// Written "LIMIT +?N", the value is an expression SQLite does not read
// while planning: the plan is the one it makes for any unknown LIMIT, and
// the rows are the same. The driver prepares every cached statement so;
// TestLimitNotReplanned fails if SQLite starts reading through the plus.
// (SQLITE_DBCONFIG_ENABLE_QPSG would do it for every plan, but
// modernc.org/sqlite has no way to set it on its connections.)

// opaqueLimits returns q with a unary plus before each bound parameter
// that is a LIMIT's whole value, outside literals, quoted names and
// comments. A statement without one is returned as it is.
func opaqueLimits(q string) string {
	var b strings.Builder
	done := 0 // q[:done] is in b
	for i := 0; i < len(q); {
		switch c := q[i]; {
		case c == '\'' || c == '"' || c == '`':
			i = skipPast(q, i+1, string(c))
		case c == '[':
			i = skipPast(q, i+1, "]")
		case strings.HasPrefix(q[i:], "--"):
			i = skipPast(q, i+2, "\n")
		case strings.HasPrefix(q[i:], "/*"):
			i = skipPast(q, i+2, "*/")
		case isWordByte(c):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			word := q[i:j]
			for j < len(q) && isSpace(q[j]) {
				j++
			}
			if strings.EqualFold(word, "limit") && j > i+len(word) && j < len(q) && strings.IndexByte("?:@$", q[j]) >= 0 {
				b.WriteString(q[done:j])
				b.WriteByte('+')
				done = j
			}
			i = j
		default:
			i++
		}
	}
	if done == 0 {
		return q
	}
	b.WriteString(q[done:])
	return b.String()
}

// skipPast returns the index just past the first end in q at or after i,
// or len(q). A doubled quote inside a literal reads as the end of one
// literal and the start of the next, which skips it all the same.
func skipPast(q string, i int, end string) int {
	if k := strings.Index(q[i:], end); k >= 0 {
		return i + k + len(end)
	}
	return len(q)
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
