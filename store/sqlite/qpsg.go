package sqlite

import (
	"database/sql/driver"
	"reflect"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite plans a statement with the value bound to its LIMIT when it is
// prepared, and marks that parameter so that binding a different value
// makes the next step parse and plan the statement again from its text
// (sqlite3ExprIsInteger, since 3.4x). River's job fetch (JobGetAvailable)
// binds the number of jobs its queue has room for: it changes on nearly
// every fetch of a busy worker, and an idle worker's queues, each with its
// own room, take turns with the one cached statement. So on SQLite the
// statement cache (driver.go) did not hold for the fetch: 160 µs a fetch
// instead of 16 (BenchmarkRebindLimit), 8% of a loaded SQLite worker's CPU
// and a third of an idle one's (docs/performance.md, round 25).
//
// SQLite's query planner stability guarantee (SQLITE_DBCONFIG_ENABLE_QPSG)
// plans without looking at bound values, so a prepared statement stays
// prepared whatever is bound. Hallmark gives nothing up for it: the only
// plans that depend on bound values are a bound LIMIT's, a LIKE with a
// bound pattern (the store has none) and those from sqlite_stat4 samples
// (it never runs ANALYZE).
//
// modernc.org/sqlite has no way to ask for it (its DSN knows _dqs and
// _defensive, not this), so enableQPSG sets it on the connection's handle,
// which modernc keeps in unexported fields: read with reflect, their names
// and types checked first. Where they are not what this expects (a
// modernc upgrade that moved them) the connection works as before,
// without the guarantee, and TestQPSG fails.
func enableQPSG(c driver.Conn) bool {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	db, tls := v.Elem().FieldByName("db"), v.Elem().FieldByName("tls")
	if !db.IsValid() || db.Kind() != reflect.Uintptr || db.Uint() == 0 ||
		!tls.IsValid() || tls.Type() != reflect.TypeFor[*libc.TLS]() || tls.IsNil() {
		return false
	}
	t := (*libc.TLS)(tls.UnsafePointer())
	// sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_QPSG, 1, NULL): its
	// variadic arguments go in a C va_list, as modernc's own dbConfigBool
	// passes them.
	const vaSlot = 8
	bp := libc.Xmalloc(t, types.Size_t(2*vaSlot))
	if bp == 0 {
		return false
	}
	defer libc.Xfree(t, bp)
	rc := sqlite3.Xsqlite3_db_config(t, uintptr(db.Uint()), sqlite3.SQLITE_DBCONFIG_ENABLE_QPSG, libc.VaList(bp, int32(1), uintptr(0)))
	return rc == sqlite3.SQLITE_OK
}
