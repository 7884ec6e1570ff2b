package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// Listener is what Listen tells of the notifications on its channel.
type Listener interface {
	// Notify is one notification's payload.
	Notify(payload string)
	// NotifyAll follows each new connection: notifications sent while
	// there was none are lost.
	NotifyAll()
}

// listenIdle is how long the listening connection waits for a
// notification before it checks that the database still answers: a
// connection lost without a word (a network partition), or left on a
// server that no longer takes writes, is noticed within about that.
const listenIdle = 30 * time.Second

// Listen LISTENs on sqlstore.VerdictChannel on one connection of its own
// (not the pool's: it is held for the process's life), made with the
// pool's settings, and passes each notification to l, until ctx ends. A
// lost connection is made again, 100 ms after the loss and up to 5 s
// apart while the database does not answer; l.NotifyAll follows each.
func Listen(ctx context.Context, pool *pgxpool.Pool, l Listener) error {
	wait := 100 * time.Millisecond
	for {
		err := listenOnce(ctx, pool, l)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errListened) {
			wait = 100 * time.Millisecond // it had worked: retry soon
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// errListened marks a connection lost after LISTEN had succeeded.
var errListened = errors.New("the listening connection was lost")

// listenOnce connects, LISTENs and delivers notifications until the
// connection fails or ctx ends.
func listenOnce(ctx context.Context, pool *pgxpool.Pool, l Listener) error {
	cfg := pool.Config().ConnConfig.Copy()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+sqlstore.VerdictChannel); err != nil {
		return err
	}
	l.NotifyAll()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			l.Notify(n.Payload)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case !pgconn.Timeout(err):
			return errors.Join(errListened, err)
		}
		// Idle: a read timing out leaves the connection usable. A server
		// that takes no writes now (a failover fenced or demoted it) sends
		// no verdicts: dial again, for the primary (failover.go).
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := writable(pctx, conn)
		cancel()
		if err != nil {
			return errors.Join(errListened, err)
		}
		if !ok {
			return errors.Join(errListened, errors.New("the server no longer takes writes"))
		}
	}
}
