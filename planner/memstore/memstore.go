package memstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/streams/memlog"
)

// Store is the in-memory planner store. It is safe for concurrent use.
type Store struct {
	log *memlog.Log

	mu       sync.Mutex
	sessions map[string]*session
	leases   map[string]lease
}

type lease struct {
	planner.Lease
	subject string // whose turn it runs
	cancel  bool   // RequestCancel was called
}

type session struct {
	planner.Session
	msgs      []planner.Message
	summaries []planner.Summary // by UpTo
	turns     map[string]*turnLog
	sends     map[sendKey]sent
}

var _ planner.Store = (*Store)(nil)

// New returns an empty store whose events go to log.
func New(log *memlog.Log) *Store {
	return &Store{log: log, sessions: map[string]*session{}, leases: map[string]lease{}}
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func notFound(id string) error {
	return fault.Errorf(planner.ErrNotFound, "session %s not found", id)
}

func (s *Store) CreateSession(ctx context.Context, sess *planner.Session) error {
	_, exists, err := s.log.Role(ctx, sess.Project, "")
	if err != nil {
		return fmt.Errorf("memstore: project %s: %w", sess.Project, err)
	}
	if !exists {
		return fault.Errorf(planner.ErrNotFound, "project %s not found", sess.Project)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.sessions[sess.ID]; dup {
		return fmt.Errorf("memstore: session %s exists", sess.ID)
	}
	c := *sess
	c.Running = false
	s.sessions[sess.ID] = &session{Session: c}
	return nil
}

// setRunningLocked sets Running and Turn from the session's lease.
func (s *Store) setRunningLocked(sess *planner.Session) {
	l, ok := s.leases[sess.ID]
	sess.Running = ok && time.Now().Before(l.ExpiresAt)
	sess.Turn = ""
	if sess.Running {
		sess.Turn = planner.TurnOfOwner(l.Owner)
	}
}

// lockSession locks the store and returns session id, or notFound; unlock undoes the lock.
// A ctx that is done is its error, before anything is looked at.
func (s *Store) lockSession(ctx context.Context, id string) (sess *session, unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	if sess = s.sessions[id]; sess == nil {
		s.mu.Unlock()
		return nil, nil, notFound(id)
	}
	return sess, s.mu.Unlock, nil
}

func (s *Store) Session(ctx context.Context, id string) (*planner.Session, error) {
	sess, unlock, err := s.lockSession(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := sess.Session
	s.setRunningLocked(&out)
	return &out, nil
}

func (s *Store) Sessions(ctx context.Context, project string, page planner.SessionPage) (planner.SessionList, error) {
	if err := page.Check(); err != nil {
		return planner.SessionList{}, err
	}
	if err := ctx.Err(); err != nil {
		return planner.SessionList{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := planner.SessionList{Sessions: []planner.Session{}}
	for _, sess := range s.sessions {
		if sess.Project == project && (page.After == nil || page.After.Before(sess.Key())) {
			c := sess.Session
			s.setRunningLocked(&c)
			list.Sessions = append(list.Sessions, c)
		}
	}
	slices.SortFunc(list.Sessions, func(a, b planner.Session) int {
		if a.Key().Before(b.Key()) {
			return -1
		}
		return 1
	})
	if len(list.Sessions) > page.Limit {
		list.Sessions = list.Sessions[:page.Limit]
		next := list.Sessions[page.Limit-1].Key()
		list.Next = &next
	}
	return list, nil
}

func (s *Store) Messages(ctx context.Context, id string, after int64) ([]planner.Message, error) {
	sess, unlock, err := s.lockSession(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []planner.Message
	for _, m := range sess.msgs {
		if m.Seq > after {
			m.Content = bytes.Clone(m.Content)
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *Store) AppendMessage(ctx context.Context, id string, m planner.NewMessage) (*planner.Message, error) {
	if err := check(m); err != nil {
		return nil, err
	}
	var content bytes.Buffer
	if err := json.Compact(&content, m.Content); err != nil {
		return nil, fmt.Errorf("memstore: message content: %w", err)
	}
	sess, unlock, err := s.lockSession(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	msg := planner.Message{Session: id, Seq: int64(len(sess.msgs)) + 1, Role: m.Role, Content: content.Bytes(), CreatedAt: now()}
	ev := planner.MessageEvent(sess.Project, id, msg.Seq, m.Role, m.Actor, msg.CreatedAt)
	if _, err := s.log.Append(ctx, ev); err != nil {
		return nil, fmt.Errorf("memstore: append message event: %w", err)
	}
	sess.msgs = append(sess.msgs, msg)
	if m.IdempotencyKey != "" {
		if sess.sends == nil {
			sess.sends = map[sendKey]sent{}
		}
		sess.sends[sendKey{m.Actor.Subject, m.IdempotencyKey}] = sent{msg.Seq, time.Now()}
	}
	out := msg
	out.Content = bytes.Clone(msg.Content)
	return &out, nil
}

// check refuses what the Postgres store's constraints refuse.
func check(m planner.NewMessage) error {
	switch m.Role {
	case planner.RoleHuman, planner.RoleAssistant, planner.RoleTool:
	default:
		return fmt.Errorf("memstore: message role %q: %w", m.Role, planner.ErrInvalid)
	}
	if !json.Valid(m.Content) {
		return fmt.Errorf("memstore: message content is not JSON: %w", planner.ErrInvalid)
	}
	return nil
}

func (s *Store) Summary(ctx context.Context, id string) (*planner.Summary, error) {
	sess, unlock, err := s.lockSession(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if len(sess.summaries) == 0 {
		return nil, nil
	}
	sum := sess.summaries[len(sess.summaries)-1]
	return &sum, nil
}

func (s *Store) SaveSummary(ctx context.Context, sum *planner.Summary) error {
	sess, unlock, err := s.lockSession(ctx, sum.Session)
	if err != nil {
		return err
	}
	defer unlock()
	if sum.UpTo < 1 || sum.UpTo > int64(len(sess.msgs)) {
		return fmt.Errorf("memstore: summary up to %d of %d messages: %w", sum.UpTo, len(sess.msgs), planner.ErrInvalid)
	}
	c := *sum
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now()
	}
	i, found := slices.BinarySearchFunc(sess.summaries, c.UpTo, func(e planner.Summary, upTo int64) int { return cmp.Compare(e.UpTo, upTo) })
	if found {
		sess.summaries[i] = c
	} else {
		sess.summaries = slices.Insert(sess.summaries, i, c)
	}
	return nil
}

func (s *Store) Acquire(ctx context.Context, id, owner, subject string, perSubject int, ttl time.Duration, tc planner.TraceContext) (bool, bool, error) {
	if err := ctx.Err(); err != nil {
		return false, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[id] == nil {
		return false, false, notFound(id)
	}
	t := time.Now()
	if perSubject > 0 {
		running := 0
		for sid, l := range s.leases {
			if sid != id && l.subject == subject && t.Before(l.ExpiresAt) {
				running++
			}
		}
		if running >= perSubject {
			return false, false, planner.LimitReached(planner.LimitTurns, perSubject, 0)
		}
	}
	l, held := s.leases[id]
	if held && t.Before(l.ExpiresAt) {
		return false, false, nil
	}
	s.leases[id] = lease{Lease: planner.Lease{Session: id, Owner: owner, ExpiresAt: t.Add(ttl), Trace: tc}, subject: subject}
	return true, held, nil
}

// Renew renews the leases under one lock, as Postgres does in one statement.
func (s *Store) Renew(ctx context.Context, leases []planner.Lease, ttl time.Duration) ([]planner.Renewal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]planner.Renewal, len(leases))
	at := time.Now().Add(ttl)
	for i, r := range leases {
		l, held := s.leases[r.Session]
		if !held || l.Owner != r.Owner {
			continue
		}
		l.ExpiresAt = at
		s.leases[r.Session] = l
		out[i] = planner.Renewal{Held: true, Cancel: l.cancel}
	}
	return out, nil
}

func (s *Store) RequestCancel(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, held := s.leases[id]; held {
		l.cancel = true
		s.leases[id] = l
	}
	return nil
}

func (s *Store) Release(ctx context.Context, id, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, held := s.leases[id]; held && l.Owner == owner {
		delete(s.leases, id)
	}
	return nil
}

func (s *Store) Expired(ctx context.Context, sessions []string) ([]planner.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := time.Now()
	var out []planner.Lease
	for _, id := range sessions {
		if l, held := s.leases[id]; held && !t.Before(l.ExpiresAt) {
			out = append(out, l.Lease)
		}
	}
	return out, nil
}

// ReleaseExpired releases the leases under one lock, as Postgres does in one statement.
func (s *Store) ReleaseExpired(ctx context.Context, leases []planner.Lease) ([]planner.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := time.Now()
	var released []planner.Lease
	for _, l := range leases {
		cur, held := s.leases[l.Session]
		if !held || cur.Owner != l.Owner || !cur.ExpiresAt.Equal(l.ExpiresAt) || t.Before(cur.ExpiresAt) {
			continue
		}
		delete(s.leases, l.Session)
		released = append(released, l)
	}
	return released, nil
}
