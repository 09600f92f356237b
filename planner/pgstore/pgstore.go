package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/streams/pglog"
)

// Store is the planner in Postgres. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var _ planner.Store = (*Store)(nil)

// New returns a store on pool, whose database has the migrations applied.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

func notFound(id string) error {
	return fault.Errorf(planner.ErrNotFound, "session %s not found", id)
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func (s *Store) CreateSession(ctx context.Context, sess *planner.Session) error {
	if !planner.ValidID(sess.ID) {
		return fmt.Errorf("pgstore: session id %q: %w", sess.ID, planner.ErrInvalid)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO planner_sessions (id, project_key, title, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5)`, sess.ID, sess.Project, sess.Title, sess.CreatedBy, sess.CreatedAt)
	switch pgCode(err) {
	case "":
	case "23503": // foreign_key_violation
		return fault.Errorf(planner.ErrNotFound, "project %s not found", sess.Project)
	case "23514", "22021": // check_violation, invalid byte sequence
		return fmt.Errorf("pgstore: create session: %v: %w", err, planner.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("pgstore: create session: %w", err)
	}
	return nil
}

const sessionColumns = `s.id::text, s.project_key, s.title, s.created_by, s.created_at,
	(SELECT l.owner FROM planner_leases l WHERE l.session_id = s.id AND l.expires_at > now())`

func scanSession(row pgx.CollectableRow) (planner.Session, error) {
	var sess planner.Session
	var owner *string
	err := row.Scan(&sess.ID, &sess.Project, &sess.Title, &sess.CreatedBy, &sess.CreatedAt, &owner)
	sess.CreatedAt = sess.CreatedAt.UTC()
	if owner != nil {
		sess.Running, sess.Turn = true, planner.TurnOfOwner(*owner)
	}
	return sess, err
}

func (s *Store) Session(ctx context.Context, id string) (*planner.Session, error) {
	if !planner.ValidID(id) {
		return nil, notFound(id)
	}
	rows, err := s.pool.Query(ctx, "SELECT "+sessionColumns+" FROM planner_sessions s WHERE s.id = $1", id)
	if err != nil {
		return nil, fmt.Errorf("pgstore: session %s: %w", id, err)
	}
	sess, err := pgx.CollectExactlyOneRow(rows, scanSession)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: session %s: %w", id, err)
	}
	return &sess, nil
}

func (s *Store) Sessions(ctx context.Context, project string, page planner.SessionPage) (planner.SessionList, error) {
	if err := page.Check(); err != nil {
		return planner.SessionList{}, err
	}
	// Keyset paging on planner_sessions_project (project_key, created_at DESC, id DESC): one
	// more row than the page says whether another page follows.
	sql := "SELECT " + sessionColumns + " FROM planner_sessions s WHERE s.project_key = $1"
	args := []any{project, page.Limit + 1}
	if page.After != nil {
		sql += " AND (s.created_at, s.id) < ($3, $4::uuid)"
		args = append(args, page.After.CreatedAt, page.After.ID)
	}
	rows, err := s.pool.Query(ctx, sql+" ORDER BY s.created_at DESC, s.id DESC LIMIT $2", args...)
	if err != nil {
		return planner.SessionList{}, fmt.Errorf("pgstore: sessions of %s: %w", project, err)
	}
	list := planner.SessionList{}
	list.Sessions, err = pgx.CollectRows(rows, scanSession)
	if err != nil {
		return planner.SessionList{}, fmt.Errorf("pgstore: sessions of %s: %w", project, err)
	}
	if len(list.Sessions) > page.Limit {
		list.Sessions = list.Sessions[:page.Limit]
		next := list.Sessions[page.Limit-1].Key()
		list.Next = &next
	}
	if list.Sessions == nil {
		list.Sessions = []planner.Session{}
	}
	return list, nil
}

func (s *Store) Messages(ctx context.Context, id string, after int64) ([]planner.Message, error) {
	if !planner.ValidID(id) {
		return nil, notFound(id)
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, role, content::text, created_at FROM planner_messages
		WHERE session_id = $1 AND seq > $2 ORDER BY seq`, id, after)
	if err != nil {
		return nil, fmt.Errorf("pgstore: messages of %s: %w", id, err)
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (planner.Message, error) {
		m := planner.Message{Session: id}
		var content string
		err := row.Scan(&m.Seq, &m.Role, &content, &m.CreatedAt)
		m.Content, m.CreatedAt = json.RawMessage(content), m.CreatedAt.UTC()
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: messages of %s: %w", id, err)
	}
	return msgs, nil
}

func (s *Store) AppendMessage(ctx context.Context, id string, m planner.NewMessage) (*planner.Message, error) {
	if !planner.ValidID(id) {
		return nil, notFound(id)
	}
	if !json.Valid(m.Content) {
		return nil, fmt.Errorf("pgstore: message content is not JSON: %w", planner.ErrInvalid)
	}
	msg := &planner.Message{Session: id, Role: m.Role}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var project string
		err := tx.QueryRow(ctx, `UPDATE planner_sessions SET last_seq = last_seq + 1 WHERE id = $1
			RETURNING last_seq, project_key`, id).Scan(&msg.Seq, &project)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return err
		}
		var content string
		err = tx.QueryRow(ctx, `INSERT INTO planner_messages (session_id, seq, role, content)
			VALUES ($1, $2, $3, $4::jsonb) RETURNING content::text, created_at`,
			id, msg.Seq, m.Role, string(m.Content)).Scan(&content, &msg.CreatedAt)
		if err != nil {
			return err
		}
		msg.Content, msg.CreatedAt = json.RawMessage(content), msg.CreatedAt.UTC()
		_, err = pglog.Insert(ctx, tx, planner.MessageEvent(project, id, msg.Seq, m.Role, m.Actor, msg.CreatedAt))
		if err != nil || m.IdempotencyKey == "" {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO planner_sends (session_id, subject, idempotency_key, seq)
			VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, subject, idempotency_key)
			DO UPDATE SET seq = EXCLUDED.seq, created_at = now()`, id, m.Actor.Subject, m.IdempotencyKey, msg.Seq)
		return err
	})
	var pe *fault.Error
	switch {
	case err == nil:
		return msg, nil
	case errors.As(err, &pe):
		return nil, err
	case pgCode(err) == "23514" || pgCode(err) == "22P02" || pgCode(err) == "22021":
		return nil, fmt.Errorf("pgstore: append message: %v: %w", err, planner.ErrInvalid)
	}
	return nil, fmt.Errorf("pgstore: append message: %w", err)
}

func (s *Store) Summary(ctx context.Context, id string) (*planner.Summary, error) {
	if !planner.ValidID(id) {
		return nil, notFound(id)
	}
	sum := &planner.Summary{Session: id}
	err := s.pool.QueryRow(ctx, `SELECT upto_seq, summary, created_at FROM planner_summaries
		WHERE session_id = $1 ORDER BY upto_seq DESC LIMIT 1`, id).Scan(&sum.UpTo, &sum.Text, &sum.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: summary of %s: %w", id, err)
	}
	sum.CreatedAt = sum.CreatedAt.UTC()
	return sum, nil
}

func (s *Store) SaveSummary(ctx context.Context, sum *planner.Summary) error {
	if !planner.ValidID(sum.Session) {
		return notFound(sum.Session)
	}
	at := sum.CreatedAt
	if at.IsZero() {
		at = time.Now()
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO planner_summaries (session_id, upto_seq, summary, created_at)
		SELECT id, $2, $3, $4 FROM planner_sessions WHERE id = $1 AND last_seq >= $2
		ON CONFLICT (session_id, upto_seq) DO UPDATE SET summary = EXCLUDED.summary, created_at = EXCLUDED.created_at`,
		sum.Session, sum.UpTo, sum.Text, at)
	switch {
	case pgCode(err) == "23514" || pgCode(err) == "22021":
		return fmt.Errorf("pgstore: save summary: %v: %w", err, planner.ErrInvalid)
	case err != nil:
		return fmt.Errorf("pgstore: save summary: %w", err)
	case tag.RowsAffected() == 0:
		if _, err := s.Session(ctx, sum.Session); err != nil {
			return err
		}
		return fmt.Errorf("pgstore: summary up to %d: beyond the transcript: %w", sum.UpTo, planner.ErrInvalid)
	}
	return nil
}
