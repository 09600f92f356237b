package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/planner"
)

// Acquire inserts the lease row, or replaces an expired one, in one statement: of concurrent
// callers exactly one gets the session. xmax is non-zero on a row version written by the
// ON CONFLICT update, which tells a replaced (stale) lease from a new one. With perSubject, the
// statement also counts the subject's unexpired leases and inserts only below the limit, in a
// transaction holding an advisory lock of the subject, so that the count of a concurrent caller
// on any replica sees the lease taken before it.
func (s *Store) Acquire(ctx context.Context, id, owner, subject string, perSubject int, ttl time.Duration, tc planner.TraceContext) (bool, bool, error) {
	if !planner.ValidID(id) {
		return false, false, notFound(id)
	}
	var (
		running  int64
		replaced *bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if perSubject > 0 {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", turnsLockSpace, subject); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `WITH running AS (
				SELECT count(*) AS n FROM planner_leases
				WHERE $5::int > 0 AND subject = $3 AND session_id <> $1::uuid AND expires_at > statement_timestamp()
			), taken AS (
				INSERT INTO planner_leases AS l (session_id, owner, subject, expires_at, traceparent, tracestate)
				SELECT $1::uuid, $2, $3, statement_timestamp() + $4 * interval '1 microsecond', $6, $7 FROM running
				WHERE $5::int <= 0 OR n < $5::int
				ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, subject = EXCLUDED.subject,
					expires_at = EXCLUDED.expires_at, cancel_requested = false, given = 0,
					traceparent = EXCLUDED.traceparent, tracestate = EXCLUDED.tracestate
					WHERE l.expires_at <= statement_timestamp()
				RETURNING xmax <> 0 AS replaced
			)
			SELECT (SELECT n FROM running), (SELECT replaced FROM taken)`,
			id, owner, subject, ttl.Microseconds(), perSubject, tc.Parent, tc.State).Scan(&running, &replaced)
	})
	switch {
	case pgCode(err) == "23503": // foreign_key_violation: no such session
		return false, false, notFound(id)
	case err != nil:
		return false, false, fmt.Errorf("pgstore: acquire lease of %s: %w", id, err)
	case perSubject > 0 && running >= int64(perSubject):
		return false, false, &planner.LimitError{Limit: planner.LimitTurns, Max: perSubject}
	case replaced == nil:
		return false, false, nil
	}
	return true, *replaced, nil
}

// turnsLockSpace is the first key of the advisory locks of subjects' turns (the second is the
// subject's hash): "bt" for ballet turns.
const turnsLockSpace int32 = 0x6274

func (s *Store) Renew(ctx context.Context, id, owner string, ttl time.Duration) (bool, bool, error) {
	if !planner.ValidID(id) {
		return false, false, nil
	}
	var cancel bool
	err := s.pool.QueryRow(ctx, `UPDATE planner_leases SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE session_id = $1 AND owner = $2 RETURNING cancel_requested`, id, owner, ttl.Microseconds()).Scan(&cancel)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, false, nil
	case err != nil:
		return false, false, fmt.Errorf("pgstore: renew lease of %s: %w", id, err)
	}
	return true, cancel, nil
}

func (s *Store) RequestCancel(ctx context.Context, id string) error {
	if !planner.ValidID(id) {
		return nil
	}
	if _, err := s.pool.Exec(ctx, "UPDATE planner_leases SET cancel_requested = true WHERE session_id = $1", id); err != nil {
		return fmt.Errorf("pgstore: request cancel of %s: %w", id, err)
	}
	return nil
}

func (s *Store) Release(ctx context.Context, id, owner string) error {
	if !planner.ValidID(id) {
		return nil
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM planner_leases WHERE session_id = $1 AND owner = $2", id, owner); err != nil {
		return fmt.Errorf("pgstore: release lease of %s: %w", id, err)
	}
	return nil
}

func (s *Store) Expired(ctx context.Context, sessions []string) ([]planner.Lease, error) {
	ids := make([]string, 0, len(sessions))
	for _, id := range sessions {
		if planner.ValidID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT session_id::text, owner, expires_at, given, traceparent, tracestate FROM planner_leases
		WHERE session_id = ANY($1::uuid[]) AND expires_at <= now()`, ids)
	if err != nil {
		return nil, fmt.Errorf("pgstore: expired leases: %w", err)
	}
	ls, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (planner.Lease, error) {
		var l planner.Lease
		err := row.Scan(&l.Session, &l.Owner, &l.ExpiresAt, &l.Given, &l.Trace.Parent, &l.Trace.State)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: expired leases: %w", err)
	}
	return ls, nil
}

func (s *Store) ReleaseExpired(ctx context.Context, l planner.Lease) (bool, error) {
	if !planner.ValidID(l.Session) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM planner_leases
		WHERE session_id = $1 AND owner = $2 AND expires_at = $3 AND expires_at <= now()`, l.Session, l.Owner, l.ExpiresAt)
	if err != nil {
		return false, fmt.Errorf("pgstore: release expired lease of %s: %w", l.Session, err)
	}
	return tag.RowsAffected() == 1, nil
}
