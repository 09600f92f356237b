package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/tracker"
)

// Store is the tracker in Postgres. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var _ tracker.Store = (*Store)(nil)

// New returns a store on pool, whose database has the migrations applied.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// tx runs f in a transaction; a returned error rolls it back.
func (s *Store) tx(ctx context.Context, op string, f func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, f)
	if err == nil {
		return nil
	}
	var te *fault.Error
	if errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// insertEvents appends evs inside tx, in order, with one statement. It validates them first.
func insertEvents(ctx context.Context, tx pgx.Tx, evs []streams.NewEvent) error {
	_, err := pglog.Insert(ctx, tx, evs...)
	return err
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Role returns subject's role in project ("" if none) and whether the project exists.
func (s *Store) Role(ctx context.Context, project, subject string) (string, bool, error) {
	if !streams.ValidProjectKey(project) || !streams.ValidText(subject) {
		return "", false, nil
	}
	var role *string
	err := s.pool.QueryRow(ctx, `SELECT (SELECT role FROM project_members WHERE project_key = p.key AND subject = $2)
		FROM projects p WHERE p.key = $1`, project, subject).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("pgstore: role in %s: %w", project, err)
	}
	if role == nil {
		return "", true, nil
	}
	return *role, true, nil
}

func (s *Store) Projects(ctx context.Context, subject string, all bool) ([]tracker.Project, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.key, p.name, coalesce(m.role, ''), p.created_at
		FROM projects p LEFT JOIN project_members m ON m.project_key = p.key AND m.subject = $1
		WHERE $2 OR m.role IS NOT NULL ORDER BY p.key`, subject, all)
	if err != nil {
		return nil, fmt.Errorf("pgstore: projects: %w", err)
	}
	ps, err := pgx.CollectRows(rows, scanProject)
	if err != nil {
		return nil, fmt.Errorf("pgstore: projects: %w", err)
	}
	if ps == nil {
		ps = []tracker.Project{}
	}
	return ps, nil
}

func scanProject(row pgx.CollectableRow) (tracker.Project, error) {
	var p tracker.Project
	err := row.Scan(&p.Key, &p.Name, &p.Role, &p.CreatedAt)
	p.CreatedAt = p.CreatedAt.UTC()
	return p, err
}

func (s *Store) Project(ctx context.Context, key, subject string) (*tracker.Project, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.key, p.name, coalesce(m.role, ''), p.created_at
		FROM projects p LEFT JOIN project_members m ON m.project_key = p.key AND m.subject = $2
		WHERE p.key = $1`, key, subject)
	if err != nil {
		return nil, fmt.Errorf("pgstore: project %s: %w", key, err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, scanProject)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fault.Errorf(tracker.ErrNotFound, "project %s not found", key)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: project %s: %w", key, err)
	}
	return &p, nil
}

func (s *Store) CreateProject(ctx context.Context, a tracker.Actor, key, name string) (*tracker.Project, error) {
	if err := tracker.CheckProject(key, name); err != nil {
		return nil, err
	}
	grant, err := streams.MemberGrantedEvent(key, a.Subject, streams.RoleAdmin, a.Kind, a.Subject)
	if err != nil {
		return nil, fault.Errorf(tracker.ErrInvalid, "project %s: bad creator", key)
	}
	p := &tracker.Project{Key: key, Name: name, Role: streams.RoleAdmin}
	err = s.tx(ctx, "create project "+key, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO projects (key, name, created_by) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO NOTHING RETURNING created_at`, key, name, a.Subject).Scan(&p.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.Errorf(tracker.ErrConflict, "project %s exists", key)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO project_members (project_key, subject, role) VALUES ($1, $2, 'admin')`, key, a.Subject); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO project_counters (project_key) VALUES ($1)`, key); err != nil {
			return err
		}
		return insertEvents(ctx, tx, []streams.NewEvent{streams.ProjectCreatedEventBy(key, name, a.Kind, a.Subject), grant})
	})
	if err != nil {
		return nil, err
	}
	p.CreatedAt = p.CreatedAt.UTC()
	return p, nil
}

func (s *Store) SetMember(ctx context.Context, a tracker.Actor, project, subject, role string) error {
	ev, err := streams.MemberGrantedEvent(project, subject, role, a.Kind, a.Subject)
	if err != nil {
		return fault.Errorf(tracker.ErrInvalid, "member %s of %s: invalid", subject, project)
	}
	return s.tx(ctx, "grant on "+project, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO project_members (project_key, subject, role) VALUES ($1, $2, $3)
			ON CONFLICT (project_key, subject) DO UPDATE SET role = EXCLUDED.role`, project, subject, role)
		if pgCode(err) == "23503" { // foreign_key_violation
			return fault.Errorf(tracker.ErrNotFound, "project %s not found", project)
		}
		if err != nil {
			return err
		}
		return insertEvents(ctx, tx, []streams.NewEvent{ev})
	})
}

func (s *Store) RemoveMember(ctx context.Context, a tracker.Actor, project, subject string) error {
	ev, err := streams.MemberRevokedEvent(project, subject, a.Kind, a.Subject)
	if err != nil {
		return fault.Errorf(tracker.ErrNotFound, "%s is not a member of %s", subject, project)
	}
	return s.tx(ctx, "revoke on "+project, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM project_members WHERE project_key = $1 AND subject = $2", project, subject)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fault.Errorf(tracker.ErrNotFound, "%s is not a member of %s", subject, project)
		}
		return insertEvents(ctx, tx, []streams.NewEvent{ev})
	})
}
