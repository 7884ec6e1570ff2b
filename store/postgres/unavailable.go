package postgres

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// unavailable reports whether err is PostgreSQL being unreachable or
// failing for a while rather than the statement failing: a connection
// that could not be made (refused, the server starting or shutting down,
// out of connections, authentication), one lost mid-query (reset, closed,
// cut short), or the server ending sessions (SQLSTATE 57P01 admin
// shutdown, 57P02 crash shutdown, 57P03 cannot connect now), any
// connection exception (class 08), insufficient resources (class 53), or
// a write refused by a standby (25006: a failover under way). A deadline
// that ran out is not one: that is the caller's own, and reported as such.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", pe.Code == "25006",
			strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"):
			return true
		}
		return false
	}
	if pgconn.Timeout(err) {
		return false
	}
	var ne net.Error
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne)
}
