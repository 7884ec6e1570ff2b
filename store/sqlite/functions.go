package sqlite

import (
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"fmt"

	"modernc.org/sqlite"
)

// The SQL functions Hallmark's schema calls, registered for every
// connection modernc opens: hallmark_sha256(text) is the lowercase hex
// SHA-256 of its argument's bytes, which the audit chain's trigger
// (migration 0023) hashes each row with, as PostgreSQL's sha256 does.
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("hallmark_sha256", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		var b []byte
		switch v := args[0].(type) {
		case string:
			b = []byte(v)
		case []byte:
			b = v
		case nil:
			return nil, nil
		default:
			return nil, fmt.Errorf("hallmark_sha256: want text, got %T", v)
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]), nil
	})
}
