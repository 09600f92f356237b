package planner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/tracker"
)

// CreateSession starts a session in project: a human caller with tracker.write on it, who
// created fewer than Options.SessionRate sessions in the last minute on this replica (else a
// limit error for LimitSessions).
func (s *Service) CreateSession(ctx context.Context, c Caller, project, title string) (*Session, error) {
	if err := checkTitle(title); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, c, project, auth.PermWrite); err != nil {
		return nil, err
	}
	if !c.Human {
		return nil, fault.Errorf(ErrForbidden, "only a person can start a planner session")
	}
	if retry, ok := s.sessionRate.take(c.Subject, time.Now()); !ok {
		s.obs.Refused(LimitSessions)
		return nil, LimitReached(LimitSessions, s.sessionRate.max, retry)
	}
	sess := &Session{
		ID: tracker.NewID(time.Now()), Project: project, Title: title, CreatedBy: c.Subject,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return nil, err
	}
	return sess, nil
}

// Sessions returns one page of a project's sessions, newest first: tracker.read.
func (s *Service) Sessions(ctx context.Context, c Caller, project string, page SessionPage) (SessionList, error) {
	if err := s.authorize(ctx, c, project, auth.PermRead); err != nil {
		return SessionList{}, err
	}
	if err := page.Check(); err != nil {
		return SessionList{}, err
	}
	return s.store.Sessions(ctx, project, page)
}

// Transcript returns a session and all its messages: tracker.read on its project.
func (s *Service) Transcript(ctx context.Context, c Caller, session string) (*Session, []Message, error) {
	sess, err := s.session(ctx, c, session, auth.PermRead)
	if err != nil {
		return nil, nil, err
	}
	msgs, err := s.store.Messages(ctx, session, 0)
	if err != nil {
		return nil, nil, err
	}
	return sess, msgs, nil
}

// Summary returns the session's latest summary (nil when it has none): tracker.read.
func (s *Service) Summary(ctx context.Context, c Caller, session string) (*Summary, error) {
	if _, err := s.session(ctx, c, session, auth.PermRead); err != nil {
		return nil, err
	}
	return s.store.Summary(ctx, session)
}

// session returns the session after checking perm on its project: a caller who may not read
// it is told that it is not found (readable), one who may read it and lacks perm is forbidden.
func (s *Service) session(ctx context.Context, c Caller, id string, perm auth.Perm) (*Session, error) {
	sess, err := s.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.readable(ctx, c, sess); err != nil {
		return nil, err
	}
	if perm != auth.PermRead {
		if err := s.authorize(ctx, c, sess.Project, perm); err != nil {
			return nil, err
		}
	}
	return sess, nil
}

// readable is nil when c may read sess, and otherwise the error of an unknown session: a
// session's id names no project, and the answer to one who may not read it must tell neither
// that it exists nor where, as items do.
func (s *Service) readable(ctx context.Context, c Caller, sess *Session) error {
	err := s.authorize(ctx, c, sess.Project, auth.PermRead)
	if errors.Is(err, ErrForbidden) || errors.Is(err, ErrNotFound) {
		return fault.Errorf(ErrNotFound, "session %s not found", sess.ID)
	}
	return err
}

// lookup returns the session, checking nothing but the form of its id.
func (s *Service) lookup(ctx context.Context, id string) (*Session, error) {
	if !ValidID(id) {
		return nil, fault.Errorf(ErrNotFound, "session %s not found", id)
	}
	return s.store.Session(ctx, id)
}

// authorize checks that the caller's role in project grants perm.
func (s *Service) authorize(ctx context.Context, c Caller, project string, perm auth.Perm) error {
	p, err := s.trk.Project(ctx, c.actor(), project)
	if err != nil {
		switch fault.KindOf(err) {
		case fault.NotFound:
			return fault.Errorf(ErrNotFound, "project %s not found", project)
		case fault.Forbidden, fault.Invalid:
			return fault.Errorf(ErrForbidden, "%s on project %s is required", perm, project)
		default:
			return fmt.Errorf("planner: role in project %s: %w", project, err)
		}
	}
	if !auth.Role(p.Role).Has(perm) {
		return fault.Errorf(ErrForbidden, "%s on project %s is required", perm, project)
	}
	return nil
}
