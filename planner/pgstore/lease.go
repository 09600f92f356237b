package pgstore

import (
	"context"
	"fmt"
	"strings"
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
		return false, false, planner.LimitReached(planner.LimitTurns, perSubject, 0)
	case replaced == nil:
		return false, false, nil
	}
	return true, *replaced, nil
}

// turnsLockSpace is the first key of the advisory locks of subjects' turns (the second is the
// subject's hash): "bt" for ballet turns.
const turnsLockSpace int32 = 0x6274

// Renew updates the leases still held with one statement. Rows are locked in session order,
// as ReleaseExpired locks them, so that a replica renewing its leases and another releasing
// some of them that expired meanwhile never deadlock.
func (s *Store) Renew(ctx context.Context, leases []planner.Lease, ttl time.Duration) ([]planner.Renewal, error) {
	out := make([]planner.Renewal, len(leases))
	ids, owners := make([]string, 0, len(leases)), make([]string, 0, len(leases))
	for _, l := range leases {
		if planner.ValidID(l.Session) {
			ids, owners = append(ids, l.Session), append(owners, l.Owner)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `WITH held AS (
			SELECT l.session_id FROM planner_leases l
			JOIN unnest($1::uuid[], $2::text[]) AS x(s, owner) ON l.session_id = x.s AND l.owner = x.owner
			ORDER BY l.session_id FOR UPDATE OF l
		)
		UPDATE planner_leases l SET expires_at = now() + $3 * interval '1 microsecond' FROM held
		WHERE l.session_id = held.session_id
		RETURNING l.session_id::text, l.owner, l.cancel_requested`, ids, owners, ttl.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("pgstore: renew %d leases: %w", len(ids), err)
	}
	type key struct{ session, owner string }
	found := map[key]bool{} // cancel requested, by renewed lease
	var k key
	var cancel bool
	_, err = pgx.ForEachRow(rows, []any{&k.session, &k.owner, &cancel}, func() error {
		found[k] = cancel
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: renew %d leases: %w", len(ids), err)
	}
	for i, l := range leases {
		c, held := found[key{strings.ToLower(l.Session), l.Owner}]
		out[i] = planner.Renewal{Held: held, Cancel: c}
	}
	return out, nil
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

// ReleaseExpired deletes with one statement, locking the rows in session order (see Renew).
// A row renewed or taken over meanwhile no longer matches, once locked, and stays.
func (s *Store) ReleaseExpired(ctx context.Context, leases []planner.Lease) ([]planner.Lease, error) {
	ids, owners := make([]string, 0, len(leases)), make([]string, 0, len(leases))
	ats := make([]time.Time, 0, len(leases))
	for _, l := range leases {
		if planner.ValidID(l.Session) {
			ids, owners, ats = append(ids, l.Session), append(owners, l.Owner), append(ats, l.ExpiresAt)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `WITH gone AS (
			SELECT l.session_id FROM planner_leases l
			JOIN unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS x(s, owner, at)
				ON l.session_id = x.s AND l.owner = x.owner AND l.expires_at = x.at
			WHERE l.expires_at <= now()
			ORDER BY l.session_id FOR UPDATE OF l
		)
		DELETE FROM planner_leases l USING gone WHERE l.session_id = gone.session_id
		RETURNING l.session_id::text`, ids, owners, ats)
	if err != nil {
		return nil, fmt.Errorf("pgstore: release %d expired leases: %w", len(ids), err)
	}
	gone := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { gone[id] = true; return nil }); err != nil {
		return nil, fmt.Errorf("pgstore: release %d expired leases: %w", len(ids), err)
	}
	released := make([]planner.Lease, 0, len(gone))
	for _, l := range leases {
		if gone[strings.ToLower(l.Session)] {
			released = append(released, l)
		}
	}
	return released, nil
}
