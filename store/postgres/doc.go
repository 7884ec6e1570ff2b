// Package postgres is the store on PostgreSQL through pgx/v5: it adapts a
// pgxpool.Pool to sqlstore's executor and classifies PostgreSQL errors
// (23505 unique → store.ErrConflict, 23503 foreign key → store.ErrNotFound,
// 40001/40P01 → retry). The store's logic lives in sqlstore; this package
// must never grow its own copy of it.
package postgres
