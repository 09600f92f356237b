package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/planner"
)

func (s *Store) AppendOutput(ctx context.Context, o planner.Output) error {
	if !planner.ValidID(o.Session) {
		return notFound(o.Session)
	}
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("pgstore: encode output: %w", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO planner_outputs (session_id, turn, "offset", output, done)
		VALUES ($1, $2, $3, $4::json, $5) ON CONFLICT DO NOTHING`, o.Session, o.Turn, o.Offset, string(b), o.Type == planner.OutputDone)
	switch {
	case pgCode(err) == "23503": // the session was deleted meanwhile
		return nil
	case err != nil:
		return fmt.Errorf("pgstore: store output %d of turn %s: %w", o.Offset, o.Turn, err)
	}
	return nil
}

// CutOutputs stores the cut as a row of its own in the offset's place: cut set, output JSON
// null (migration 0006_planner_output_cut).
func (s *Store) CutOutputs(ctx context.Context, session, turn string, offset int64) error {
	if !planner.ValidID(session) {
		return notFound(session)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO planner_outputs (session_id, turn, "offset", output, cut)
		VALUES ($1, $2, $3, 'null', true) ON CONFLICT DO NOTHING`, session, turn, offset)
	switch {
	case pgCode(err) == "23503": // the session was deleted meanwhile
		return nil
	case err != nil:
		return fmt.Errorf("pgstore: store the cut of turn %s at %d: %w", turn, offset, err)
	}
	return nil
}

func (s *Store) TurnOutputs(ctx context.Context, session, turn string, after int64, window time.Duration) (planner.KeptOutputs, bool, error) {
	if !planner.ValidID(session) || turn == "" {
		return planner.KeptOutputs{}, false, nil
	}
	// A turn whose done is older than the window is over for resuming, whatever is left.
	var kept planner.KeptOutputs
	var found, expired bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM planner_outputs WHERE session_id = $1 AND turn = $2),
			coalesce((SELECT "offset" FROM planner_outputs WHERE session_id = $1 AND turn = $2 AND cut), 0),
			d.at IS NOT NULL, coalesce(d.at < now() - $3 * interval '1 microsecond', false)
		FROM (SELECT min(created_at) AS at FROM planner_outputs WHERE session_id = $1 AND turn = $2 AND done) d`,
		session, turn, window.Microseconds()).Scan(&found, &kept.Cut, &kept.Ended, &expired)
	if err != nil {
		return planner.KeptOutputs{}, false, fmt.Errorf("pgstore: outputs of turn %s: %w", turn, err)
	}
	if !found || expired {
		return planner.KeptOutputs{}, false, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT output::text FROM planner_outputs
		WHERE session_id = $1 AND turn = $2 AND "offset" > $3 AND NOT cut ORDER BY "offset"`, session, turn, after)
	if err != nil {
		return planner.KeptOutputs{}, false, fmt.Errorf("pgstore: outputs of turn %s: %w", turn, err)
	}
	outs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (planner.Output, error) {
		var text string
		var o planner.Output
		if err := row.Scan(&text); err != nil {
			return o, err
		}
		return o, json.Unmarshal([]byte(text), &o)
	})
	if err != nil {
		return planner.KeptOutputs{}, false, fmt.Errorf("pgstore: outputs of turn %s: %w", turn, err)
	}
	kept.Outputs = outs
	return kept, true, nil
}

func (s *Store) LastOffset(ctx context.Context, session, turn string) (int64, error) {
	if !planner.ValidID(session) {
		return 0, nil
	}
	var last int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max("offset"), 0) FROM planner_outputs WHERE session_id = $1 AND turn = $2`,
		session, turn).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("pgstore: last output of turn %s: %w", turn, err)
	}
	return last, nil
}

func (s *Store) ExpireOutputs(ctx context.Context, window, abandoned time.Duration) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM planner_outputs o USING (
			SELECT session_id, turn FROM planner_outputs WHERE done AND created_at < now() - $1 * interval '1 microsecond'
			UNION
			SELECT session_id, turn FROM planner_outputs GROUP BY session_id, turn
				HAVING max(created_at) < now() - $2 * interval '1 microsecond'
		) x WHERE o.session_id = x.session_id AND o.turn = x.turn`, window.Microseconds(), abandoned.Microseconds())
	if err != nil {
		return fmt.Errorf("pgstore: expire outputs: %w", err)
	}
	return nil
}

func (s *Store) SentWithKey(ctx context.Context, session, subject, key string, within time.Duration) (int64, bool, error) {
	if !planner.ValidID(session) {
		return 0, false, nil
	}
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT seq FROM planner_sends WHERE session_id = $1 AND subject = $2 AND idempotency_key = $3
		AND created_at > now() - $4 * interval '1 microsecond'`, session, subject, key, within.Microseconds()).Scan(&seq)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("pgstore: send with key: %w", err)
	}
	return seq, true, nil
}

func (s *Store) ExpireSends(ctx context.Context, within time.Duration) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM planner_sends WHERE created_at < now() - $1 * interval '1 microsecond'`,
		within.Microseconds()); err != nil {
		return fmt.Errorf("pgstore: expire idempotency keys: %w", err)
	}
	return nil
}
