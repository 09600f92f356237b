package admission

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Conns counts the connections being opened or open on the replica against a maximum
// (BALLET_MAX_CONNECTIONS). Safe for concurrent use.
type Conns struct {
	max int64
	n   atomic.Int64
}

// NewConns returns a count that admits max connections at once.
func NewConns(max int) *Conns { return &Conns{max: int64(max)} }

// Acquire counts a connection being opened; false, and not counted, when the replica has
// max already.
func (c *Conns) Acquire() bool {
	if c.n.Add(1) <= c.max {
		return true
	}
	c.n.Add(-1)
	return false
}

// Release uncounts a connection Acquire counted.
func (c *Conns) Release() { c.n.Add(-1) }

// Subjects is the replica's registry of authenticated connections, of type C, by subject:
// it counts each subject's against a maximum (BALLET_MAX_CONNECTIONS_PER_SUBJECT) and holds
// what they share, of type B, while the subject has one here. Safe for concurrent use.
type Subjects[C comparable, B any] struct {
	max       int
	newShared func() B

	mu        sync.Mutex
	bySubject map[string]*subjectConns[C, B] // guarded by mu
}

// subjectConns is one subject's entry: its connections, never none, and what they share.
type subjectConns[C comparable, B any] struct {
	conns  []C
	shared B
}

// NewSubjects returns a registry that admits max connections of a subject, whose first
// connection is given newShared() to share with the others.
func NewSubjects[C comparable, B any](max int, newShared func() B) *Subjects[C, B] {
	return &Subjects[C, B]{max: max, newShared: newShared}
}

// Acquire counts c, a connection of subject, and returns what the subject's connections
// share; ok false, and c not counted, when the subject has max connections already.
func (r *Subjects[C, B]) Acquire(subject string, c C) (shared B, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.bySubject[subject]
	switch {
	case e == nil:
		if r.bySubject == nil {
			r.bySubject = make(map[string]*subjectConns[C, B])
		}
		e = &subjectConns[C, B]{shared: r.newShared()}
		r.bySubject[subject] = e
	case len(e.conns) >= r.max:
		return shared, false
	}
	e.conns = append(e.conns, c)
	return e.shared, true
}

// Release uncounts c, a connection of subject that Acquire counted; what the subject's
// connections share goes with its last.
func (r *Subjects[C, B]) Release(subject string, c C) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.bySubject[subject]
	if e == nil {
		return
	}
	if len(e.conns) <= 1 {
		delete(r.bySubject, subject)
		return
	}
	if i := slices.Index(e.conns, c); i >= 0 {
		e.conns = slices.Delete(e.conns, i, i+1)
	}
}

// Conns returns the connections of subject counted now.
func (r *Subjects[C, B]) Conns(subject string) []C {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.bySubject[subject]; e != nil {
		return slices.Clone(e.conns)
	}
	return nil
}

// Len is how many subjects have a connection counted.
func (r *Subjects[C, B]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bySubject)
}
