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
	return s.AppendOutputs(ctx, planner.OutputBatch{Outputs: []planner.Output{o}})
}

// CutOutputs stores the cut as a row of its own in the offset's place: cut set, output JSON
// null (migration 0006_planner_output_cut).
func (s *Store) CutOutputs(ctx context.Context, session, turn string, offset int64) error {
	if !planner.ValidID(session) {
		return notFound(session)
	}
	return s.AppendOutputs(ctx, planner.OutputBatch{Cuts: []planner.Output{{Session: session, Turn: turn, Offset: offset}}})
}

// AppendOutputs writes the batch in one statement: the rows from arrays (unnest), of sessions
// that exist, and the leases' given offsets. planner_outputs has no foreign key (migration
// 0013_planner_cheaper_writes): checking one locked the session row of every output, which
// cost a WAL record and a WAL flush at every commit of a table that is otherwise unlogged.
func (s *Store) AppendOutputs(ctx context.Context, b planner.OutputBatch) error {
	n := len(b.Outputs) + len(b.Cuts)
	sessions, turns, texts := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	offsets, done, cut := make([]int64, 0, n), make([]bool, 0, n), make([]bool, 0, n)
	for _, o := range b.Outputs {
		if !planner.ValidID(o.Session) {
			continue
		}
		j, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("pgstore: encode output: %w", err)
		}
		sessions, turns, offsets, texts = append(sessions, o.Session), append(turns, o.Turn), append(offsets, o.Offset), append(texts, string(j))
		done, cut = append(done, o.Type == planner.OutputDone), append(cut, false)
	}
	for _, o := range b.Cuts {
		if planner.ValidID(o.Session) {
			sessions, turns, offsets, texts = append(sessions, o.Session), append(turns, o.Turn), append(offsets, o.Offset), append(texts, "null")
			done, cut = append(done, false), append(cut, true)
		}
	}
	var gs, owners []string
	var given []int64
	for _, l := range b.Given {
		if planner.ValidID(l.Session) {
			gs, owners, given = append(gs, l.Session), append(owners, l.Owner), append(given, l.Given)
		}
	}
	if len(sessions)+len(gs) == 0 {
		return nil
	}
	var err error
	switch {
	case len(sessions) == 1 && len(gs) == 0:
		// One output alone (no batching): the plain statement, which plans in a fraction of
		// the batch's time.
		_, err = s.pool.Exec(ctx, `INSERT INTO planner_outputs (session_id, turn, "offset", output, done, cut)
			SELECT $1, $2, $3, $4::json, $5, $6 WHERE EXISTS (SELECT 1 FROM planner_sessions WHERE id = $1)
			ON CONFLICT DO NOTHING`, sessions[0], turns[0], offsets[0], texts[0], done[0], cut[0])
	case len(gs) == 0:
		_, err = s.pool.Exec(ctx, `INSERT INTO planner_outputs (session_id, turn, "offset", output, done, cut)
			SELECT x.s, x.t, x.o, x.j::json, x.d, x.c
			FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bool[], $6::bool[]) AS x(s, t, o, j, d, c)
			WHERE EXISTS (SELECT 1 FROM planner_sessions WHERE id = x.s)
			ON CONFLICT DO NOTHING`, sessions, turns, offsets, texts, done, cut)
	default:
		// The leases are locked in session order, as Renew and ReleaseExpired lock them.
		_, err = s.pool.Exec(ctx, `WITH kept AS (
				INSERT INTO planner_outputs (session_id, turn, "offset", output, done, cut)
				SELECT x.s, x.t, x.o, x.j::json, x.d, x.c
				FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bool[], $6::bool[]) AS x(s, t, o, j, d, c)
				WHERE EXISTS (SELECT 1 FROM planner_sessions WHERE id = x.s)
				ON CONFLICT DO NOTHING
			), held AS (
				SELECT l.session_id, g.o FROM planner_leases l
				JOIN unnest($7::uuid[], $8::text[], $9::bigint[]) AS g(s, owner, o) ON l.session_id = g.s AND l.owner = g.owner
				ORDER BY l.session_id FOR UPDATE OF l
			)
			UPDATE planner_leases l SET given = greatest(l.given, held.o) FROM held WHERE l.session_id = held.session_id`,
			sessions, turns, offsets, texts, done, cut, gs, owners, given)
	}
	if err != nil {
		return fmt.Errorf("pgstore: store %d outputs: %w", len(sessions), err)
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
