package memlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ballet/gateway/streams"
)

// Log is an in-memory event log. It is safe for concurrent use.
type Log struct {
	mu       sync.RWMutex
	events   []streams.Event
	byProj   map[string][]int // project key → indexes into events
	byItem   map[string][]int // item entity key → indexes into events
	nextSeq  int64
	wakeCh   chan struct{} // closed and replaced on every append
	closed   bool
	closedCh chan struct{}

	projects map[string]*project
	subjects map[string]*streams.SubjectControl // operators' sign-outs and blocks
}

type project struct {
	name      string
	createdBy string
	createdAt time.Time
	members   map[string]string // subject → role
}

var (
	_ streams.Log          = (*Log)(nil)
	_ streams.Appender     = (*Log)(nil)
	_ streams.ProjectStore = (*Log)(nil)
)

// New returns an empty log.
func New() *Log {
	return &Log{
		byProj:   map[string][]int{},
		byItem:   map[string][]int{},
		nextSeq:  1,
		wakeCh:   make(chan struct{}),
		closedCh: make(chan struct{}),
		projects: map[string]*project{},
		subjects: map[string]*streams.SubjectControl{},
	}
}

// Close makes blocked and later Waits return streams.ErrClosed; reads and writes keep working,
// as with pglog. Safe to call twice.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.closedCh)
	}
	return nil
}

// Head returns the highest seq, 0 for an empty log.
func (l *Log) Head(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.headLocked(), nil
}

func (l *Log) headLocked() int64 {
	if len(l.events) == 0 {
		return 0
	}
	return l.events[len(l.events)-1].Seq
}

// ReadAfter returns at most limit events with seq > after, in seq order.
func (l *Log) ReadAfter(ctx context.Context, after int64, limit int) ([]streams.Event, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memlog: read after %d: limit %d: %w", after, limit, streams.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := sort.Search(len(l.events), func(i int) bool { return l.events[i].Seq > after })
	j := min(len(l.events), i+limit)
	if i == j {
		return nil, nil
	}
	out := make([]streams.Event, j-i)
	for k := range out {
		out[k] = clone(&l.events[i+k])
	}
	return out, nil
}

// CountStream counts the stream's events with after < seq <= upto, at most limit of them
// (streams.Counter), without copying them.
func (l *Log) CountStream(ctx context.Context, s streams.Stream, after, upto int64, limit int) (int, error) {
	n := 0
	err := l.scanStream(ctx, s, after, upto, max(limit, 1), func(*streams.Event) { n++ })
	return n, err
}

// ReadStream returns at most limit events of s with after < seq <= upto, in seq order.
func (l *Log) ReadStream(ctx context.Context, s streams.Stream, after, upto int64, limit int) ([]streams.Event, error) {
	var out []streams.Event
	err := l.scanStream(ctx, s, after, upto, limit, func(e *streams.Event) { out = append(out, clone(e)) })
	return out, err
}

// scanStream calls f, holding the lock, with each of s's events with after < seq <= upto in
// seq order, at most limit of them.
func (l *Log) scanStream(ctx context.Context, s streams.Stream, after, upto int64, limit int, f func(*streams.Event)) error {
	if limit <= 0 {
		return fmt.Errorf("memlog: read %s: limit %d: %w", s, limit, streams.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	var idx []int
	switch s.Kind {
	case streams.StreamProject:
		idx = l.byProj[s.Key]
	case streams.StreamItem:
		idx = l.byItem[s.Key]
	default:
		return fmt.Errorf("memlog: read %s: %w", s, streams.ErrBadStream)
	}
	if upto <= after {
		return nil
	}
	i := sort.Search(len(idx), func(i int) bool { return l.events[idx[i]].Seq > after })
	for n := 0; i < len(idx) && n < limit && l.events[idx[i]].Seq <= upto; i, n = i+1, n+1 {
		f(&l.events[idx[i]])
	}
	return nil
}

func clone(e *streams.Event) streams.Event {
	c := *e
	c.Payload = bytes.Clone(e.Payload)
	return c
}

// Wait returns when an append happens, at once when the log already has events after
// `after`, when ctx ends (ctx.Err()) or when the log is closed (streams.ErrClosed).
func (l *Log) Wait(ctx context.Context, after int64) error {
	l.mu.RLock()
	ch, head, closed := l.wakeCh, l.headLocked(), l.closed
	l.mu.RUnlock()
	switch {
	case closed:
		return streams.ErrClosed
	case head > after:
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.closedCh:
		return streams.ErrClosed
	}
}

// Append appends evs atomically and returns the last seq (0 when evs is empty). Events with
// a zero OccurredAt get the time of the append, shared by the whole batch like now() in one
// Postgres transaction.
func (l *Log) Append(ctx context.Context, evs ...streams.NewEvent) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	rows, err := prepare(evs)
	if err != nil {
		return 0, fmt.Errorf("memlog: append: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(rows), nil
}

// prepare validates evs and turns them into events without seq, as Postgres would store them.
func prepare(evs []streams.NewEvent) ([]streams.Event, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	rows := make([]streams.Event, len(evs))
	for i := range evs {
		e := &evs[i]
		if err := e.Validate(); err != nil {
			return nil, err
		}
		var payload bytes.Buffer
		if err := json.Compact(&payload, e.PayloadOrEmpty()); err != nil {
			return nil, fmt.Errorf("event %s payload: %v: %w", e.Type, err, streams.ErrInvalid)
		}
		at := now
		if !e.OccurredAt.IsZero() {
			at = e.OccurredAt.UTC().Truncate(time.Microsecond)
		}
		rows[i] = streams.Event{
			ProjectKey: e.ProjectKey, Type: e.Type, EntityType: e.EntityType, EntityID: e.EntityID,
			EntityKey: e.EntityKey, OccurredAt: at, ActorKind: e.ActorKind, ActorSubject: e.ActorSubject,
			Payload: payload.Bytes(),
		}
	}
	return rows, nil
}

func (l *Log) appendLocked(rows []streams.Event) int64 {
	for _, e := range rows {
		e.Seq = l.nextSeq
		l.nextSeq++
		i := len(l.events)
		l.events = append(l.events, e)
		l.byProj[e.ProjectKey] = append(l.byProj[e.ProjectKey], i)
		if e.EntityType == "item" && e.EntityKey != "" {
			l.byItem[e.EntityKey] = append(l.byItem[e.EntityKey], i)
		}
	}
	close(l.wakeCh)
	l.wakeCh = make(chan struct{})
	return l.nextSeq - 1
}
