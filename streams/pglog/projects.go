package pglog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ballet/gateway/streams"
)

// CreateProject creates project key and appends project.created in the same transaction. The
// event's actor is (human, createdBy), or (system, "") when createdBy is empty.
func (l *Log) CreateProject(ctx context.Context, key, name, createdBy string) error {
	ev := streams.ProjectCreatedEvent(key, name, createdBy)
	return l.createProject(ctx, key, name, createdBy, ev)
}

// CreateProjectAs is CreateProject with the event's actor (actorKind, actorSubject); the
// project's creator is actorSubject.
func (l *Log) CreateProjectAs(ctx context.Context, key, name, actorKind, actorSubject string) error {
	ev := streams.ProjectCreatedEventBy(key, name, actorKind, actorSubject)
	return l.createProject(ctx, key, name, actorSubject, ev)
}

func (l *Log) createProject(ctx context.Context, key, name, createdBy string, ev streams.NewEvent) error {
	if err := streams.CheckProject(key, name, createdBy); err != nil {
		return fmt.Errorf("create project %q: %w", key, err)
	}
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO projects (key, name, created_by) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING",
			key, name, createdBy)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return streams.ErrExists
		}
		_, err = insertEvents(ctx, tx, []streams.NewEvent{ev})
		return err
	})
	if err != nil {
		return fmt.Errorf("create project %q: %w", key, err)
	}
	return nil
}

// Grant gives subject role in project key (replacing any other role) and appends
// member.granted {subject, role}.
func (l *Log) Grant(ctx context.Context, key, subject, role, actorKind, actorSubject string) error {
	ev, err := streams.MemberGrantedEvent(key, subject, role, actorKind, actorSubject)
	if err != nil {
		return fmt.Errorf("grant %s on %q: %w", role, key, err)
	}
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO project_members (project_key, subject, role) VALUES ($1, $2, $3)
			ON CONFLICT (project_key, subject) DO UPDATE SET role = EXCLUDED.role`, key, subject, role)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
			return streams.ErrNotFound
		}
		if err != nil {
			return err
		}
		_, err = insertEvents(ctx, tx, []streams.NewEvent{ev})
		return err
	})
	if err != nil {
		return fmt.Errorf("grant %s on %q: %w", role, key, err)
	}
	return nil
}

// Revoke removes subject from project key and appends member.revoked {subject}.
func (l *Log) Revoke(ctx context.Context, key, subject, actorKind, actorSubject string) error {
	ev, err := streams.MemberRevokedEvent(key, subject, actorKind, actorSubject)
	if err != nil {
		return fmt.Errorf("revoke on %q: %w", key, err)
	}
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM project_members WHERE project_key = $1 AND subject = $2", key, subject)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return streams.ErrNotFound
		}
		_, err = insertEvents(ctx, tx, []streams.NewEvent{ev})
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke on %q: %w", key, err)
	}
	return nil
}

// Role returns subject's role in project key ("" if not a member) and whether the project
// exists.
func (l *Log) Role(ctx context.Context, key, subject string) (string, bool, error) {
	if !streams.ValidText(subject) {
		return "", false, fmt.Errorf("role in %q: subject: %w", key, streams.ErrInvalid)
	}
	if !streams.ValidProjectKey(key) {
		return "", false, nil
	}
	var exists bool
	var role *string
	err := l.pool.QueryRow(ctx, `SELECT true, (SELECT role FROM project_members WHERE project_key = p.key AND subject = $2)
		FROM projects p WHERE p.key = $1`, key, subject).Scan(&exists, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("role in %q: %w", key, err)
	}
	if role == nil {
		return "", true, nil
	}
	return *role, true, nil
}
