package memlog

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/gateway/streams"
)

// CreateProject creates project key and appends project.created atomically, like pglog.
func (l *Log) CreateProject(ctx context.Context, key, name, createdBy string) error {
	if err := streams.CheckProject(key, name, createdBy); err != nil {
		return fmt.Errorf("create project %q: %w", key, err)
	}
	rows, err := prepare([]streams.NewEvent{streams.ProjectCreatedEvent(key, name, createdBy)})
	if err != nil {
		return fmt.Errorf("create project %q: %w", key, err)
	}
	return l.update(ctx, func() error {
		if _, ok := l.projects[key]; ok {
			return fmt.Errorf("create project %q: %w", key, streams.ErrExists)
		}
		l.projects[key] = &project{name: name, createdBy: createdBy, createdAt: time.Now(), members: map[string]string{}}
		l.appendLocked(rows)
		return nil
	})
}

// Grant gives subject role in project key and appends member.granted, like pglog.
func (l *Log) Grant(ctx context.Context, key, subject, role, actorKind, actorSubject string) error {
	ev, err := streams.MemberGrantedEvent(key, subject, role, actorKind, actorSubject)
	if err != nil {
		return fmt.Errorf("grant %s on %q: %w", role, key, err)
	}
	rows, err := prepare([]streams.NewEvent{ev})
	if err != nil {
		return fmt.Errorf("grant %s on %q: %w", role, key, err)
	}
	return l.update(ctx, func() error {
		p, ok := l.projects[key]
		if !ok {
			return fmt.Errorf("grant %s on %q: %w", role, key, streams.ErrNotFound)
		}
		p.members[subject] = role
		l.appendLocked(rows)
		return nil
	})
}

// Revoke removes subject from project key and appends member.revoked, like pglog.
func (l *Log) Revoke(ctx context.Context, key, subject, actorKind, actorSubject string) error {
	ev, err := streams.MemberRevokedEvent(key, subject, actorKind, actorSubject)
	if err != nil {
		return fmt.Errorf("revoke on %q: %w", key, err)
	}
	rows, err := prepare([]streams.NewEvent{ev})
	if err != nil {
		return fmt.Errorf("revoke on %q: %w", key, err)
	}
	return l.update(ctx, func() error {
		p, ok := l.projects[key]
		if !ok {
			return fmt.Errorf("revoke on %q: %w", key, streams.ErrNotFound)
		}
		if _, ok := p.members[subject]; !ok {
			return fmt.Errorf("revoke on %q: %w", key, streams.ErrNotFound)
		}
		delete(p.members, subject)
		l.appendLocked(rows)
		return nil
	})
}

// Role returns subject's role in project key ("" if not a member) and whether the project
// exists.
func (l *Log) Role(ctx context.Context, key, subject string) (string, bool, error) {
	if !streams.ValidText(subject) {
		return "", false, fmt.Errorf("role in %q: subject: %w", key, streams.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	p, ok := l.projects[key]
	if !ok {
		return "", false, nil
	}
	return p.members[subject], true, nil
}

// update runs f under the write lock unless ctx ended.
func (l *Log) update(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return f()
}
