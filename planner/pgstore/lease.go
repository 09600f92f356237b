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
// ON CONFLICT update, which tells a replaced (stale) lease from a new one.
func (s *Store) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (bool, bool, error) {
	if !planner.ValidID(id) {
		return false, false, notFound(id)
	}
	var replaced bool
	err := s.pool.QueryRow(ctx, `INSERT INTO planner_leases AS l (session_id, owner, expires_at)
		VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at,
			cancel_requested = false
			WHERE l.expires_at <= now()
		RETURNING xmax <> 0`, id, owner, ttl.Microseconds()).Scan(&replaced)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, false, nil
	case pgCode(err) == "23503": // foreign_key_violation: no such session
		return false, false, notFound(id)
	case err != nil:
		return false, false, fmt.Errorf("pgstore: acquire lease of %s: %w", id, err)
	}
	return true, replaced, nil
}

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
	rows, err := s.pool.Query(ctx, `SELECT session_id::text, owner, expires_at FROM planner_leases
		WHERE session_id = ANY($1::uuid[]) AND expires_at <= now()`, ids)
	if err != nil {
		return nil, fmt.Errorf("pgstore: expired leases: %w", err)
	}
	ls, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (planner.Lease, error) {
		var l planner.Lease
		err := row.Scan(&l.Session, &l.Owner, &l.ExpiresAt)
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
