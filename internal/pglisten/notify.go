package pglisten

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxPayload is the longest payload this module's senders hand Notify: NOTIFY refuses 8000
// bytes or more, so a longer message is cut into several notifications (Pack).
const MaxPayload = 7000

// DB is what Notify sends on: a pool, a connection or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = (*pgx.Conn)(nil)
	_ DB = (pgx.Tx)(nil)
)

const notifySQL = "SELECT pg_notify($1, $2)"

// Notify sends payloads on channel, in order, all or none: Postgres delivers them together
// when their transaction commits, and drops a payload repeated within one transaction. In a
// transaction (db a pgx.Tx) that is the caller's; on a pool or a connection, several
// payloads go in one batch, which pgx runs as one implicit transaction, in one round trip.
func Notify(ctx context.Context, db DB, channel string, payloads ...string) error {
	switch len(payloads) {
	case 0:
		return nil
	case 1:
		_, err := db.Exec(ctx, notifySQL, channel, payloads[0])
		return err
	}
	b := &pgx.Batch{}
	for _, p := range payloads {
		b.Queue(notifySQL, channel, p)
	}
	return db.SendBatch(ctx, b).Close()
}
