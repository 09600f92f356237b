package pglog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/streams"
)

// ChangeSubject makes the change of the event type typ (streams.EventSubject*) to subject and
// appends that event, in the same transaction: a sign-out at the current second of the database.
func (l *Log) ChangeSubject(ctx context.Context, typ, subject, actorKind, actorSubject string) (streams.SubjectControl, error) {
	c := streams.SubjectControl{Subject: subject}
	if err := streams.CheckSubjectChange(typ, subject, actorKind, actorSubject); err != nil {
		return c, fmt.Errorf("%s: %w", typ, err)
	}
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var at int64
		if typ == streams.EventSubjectSignedOut {
			if err := tx.QueryRow(ctx, "SELECT extract(epoch FROM date_trunc('second', now()))::bigint").Scan(&at); err != nil {
				return err
			}
		}
		seq, err := insertEvents(ctx, tx, []streams.NewEvent{streams.SubjectEvent(typ, subject, actorKind, actorSubject, at)})
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO subject_controls AS c (subject, signed_out_at, blocked, seq, updated_by)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (subject) DO UPDATE SET
				signed_out_at = greatest(c.signed_out_at, EXCLUDED.signed_out_at),
				blocked = CASE WHEN $6 THEN c.blocked ELSE EXCLUDED.blocked END,
				seq = EXCLUDED.seq, updated_at = now(), updated_by = EXCLUDED.updated_by
			RETURNING signed_out_at, blocked, seq`,
			subject, at, typ == streams.EventSubjectBlocked, seq, actorSubject, typ == streams.EventSubjectSignedOut,
		).Scan(&c.SignedOutAt, &c.Blocked, &c.Seq)
	})
	if err != nil {
		return c, fmt.Errorf("%s: %w", typ, err)
	}
	return c, nil
}

// SubjectControls returns every subject signed out or blocked.
func (l *Log) SubjectControls(ctx context.Context) ([]streams.SubjectControl, error) {
	rows, err := l.pool.Query(ctx, "SELECT subject, signed_out_at, blocked, seq FROM subject_controls")
	if err != nil {
		return nil, fmt.Errorf("subject controls: %w", err)
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (streams.SubjectControl, error) {
		var c streams.SubjectControl
		err := r.Scan(&c.Subject, &c.SignedOutAt, &c.Blocked, &c.Seq)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("subject controls: %w", err)
	}
	return cs, nil
}
