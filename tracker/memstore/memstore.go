package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/tracker"
)

// Store is the in-memory tracker store. It is safe for concurrent use.
type Store struct {
	log *memlog.Log

	mu       sync.Mutex
	counters map[string]int64 // project → last item number
	items    map[string]*item // by key
	// Projects as read from the log's project.created events, up to scanned.
	projects map[string]tracker.Project
	scanned  int64
	now      func() time.Time
}

type item struct {
	tracker.Item                     // BlockedBy unused: see blockedBy
	blockedBy    map[string]struct{} // keys of the items blocking this one
	blocks       map[string]struct{} // keys of the items this one blocks
}

var _ tracker.Store = (*Store)(nil)

// New returns a store whose projects, members and events are in log.
func New(log *memlog.Log) *Store {
	return &Store{
		log: log, counters: map[string]int64{}, items: map[string]*item{},
		projects: map[string]tracker.Project{}, now: time.Now,
	}
}

// timestamp is the time of a write, as precise as Postgres keeps it.
func (s *Store) timestamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

func (s *Store) Role(ctx context.Context, project, subject string) (string, bool, error) {
	return s.log.Role(ctx, project, subject)
}

// scanProjects brings the project index up to date with the log. Callers hold s.mu.
func (s *Store) scanProjects(ctx context.Context) error {
	for {
		evs, err := s.log.ReadAfter(ctx, s.scanned, 1000)
		if err != nil {
			return fmt.Errorf("memstore: read projects: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		for i := range evs {
			e := &evs[i]
			s.scanned = e.Seq
			if e.Type != "project.created" {
				continue
			}
			var p struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			s.projects[e.ProjectKey] = tracker.Project{Key: e.ProjectKey, Name: p.Name, CreatedAt: e.OccurredAt}
		}
	}
}

func (s *Store) Projects(ctx context.Context, subject string, all bool) ([]tracker.Project, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.scanProjects(ctx); err != nil {
		return nil, err
	}
	out := []tracker.Project{}
	for _, p := range s.projects {
		role, _, err := s.log.Role(ctx, p.Key, subject)
		if err != nil {
			return nil, err
		}
		if role == "" && !all {
			continue
		}
		p.Role = role
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b tracker.Project) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *Store) Project(ctx context.Context, key, subject string) (*tracker.Project, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.scanProjects(ctx); err != nil {
		return nil, err
	}
	p, ok := s.projects[key]
	if !ok {
		return nil, fault.Errorf(tracker.ErrNotFound, "project %s not found", key)
	}
	role, _, err := s.log.Role(ctx, key, subject)
	if err != nil {
		return nil, err
	}
	p.Role = role
	return &p, nil
}

func (s *Store) CreateProject(ctx context.Context, a tracker.Actor, key, name string) (*tracker.Project, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked before the first append, so that the grant cannot fail after the creation.
	if _, err := streams.MemberGrantedEvent(key, a.Subject, streams.RoleAdmin, a.Kind, a.Subject); err != nil {
		return nil, fault.Errorf(tracker.ErrInvalid, "project %s: bad creator", key)
	}
	err := s.log.CreateProject(ctx, key, name, a.Subject)
	switch {
	case errors.Is(err, streams.ErrExists):
		return nil, fault.Errorf(tracker.ErrConflict, "project %s exists", key)
	case errors.Is(err, streams.ErrInvalid):
		return nil, fault.Errorf(tracker.ErrInvalid, "project %s: %v", key, err)
	case err != nil:
		return nil, fmt.Errorf("memstore: create project %s: %w", key, err)
	}
	if err := s.log.Grant(ctx, key, a.Subject, streams.RoleAdmin, a.Kind, a.Subject); err != nil {
		return nil, fmt.Errorf("memstore: create project %s: grant admin: %w", key, err)
	}
	if err := s.scanProjects(ctx); err != nil {
		return nil, err
	}
	p := s.projects[key]
	p.Role = streams.RoleAdmin
	return &p, nil
}

func (s *Store) SetMember(ctx context.Context, a tracker.Actor, project, subject, role string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memberErr(s.log.Grant(ctx, project, subject, role, a.Kind, a.Subject), project, subject)
}

func (s *Store) RemoveMember(ctx context.Context, a tracker.Actor, project, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memberErr(s.log.Revoke(ctx, project, subject, a.Kind, a.Subject), project, subject)
}

func memberErr(err error, project, subject string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, streams.ErrNotFound):
		return fault.Errorf(tracker.ErrNotFound, "%s is not a member of %s, or the project does not exist", subject, project)
	case errors.Is(err, streams.ErrInvalid):
		return fault.Errorf(tracker.ErrInvalid, "member %s of %s: invalid", subject, project)
	}
	return fmt.Errorf("memstore: member %s of %s: %w", subject, project, err)
}
