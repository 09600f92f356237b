package admission_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ballet/gateway/internal/admission"
)

// The replica admits its maximum of connections, refuses the next, and admits again once
// one is released.
func TestConnsMaximum(t *testing.T) {
	c := admission.NewConns(3)
	for i := range 3 {
		if !c.Acquire() {
			t.Fatalf("connection %d refused under the maximum", i)
		}
	}
	if c.Acquire() {
		t.Fatal("a fourth connection admitted with a maximum of 3")
	}
	c.Release()
	if !c.Acquire() {
		t.Fatal("refused after a release")
	}
}

// Connections opened and closed at once never pass the maximum, and a refusal counts nothing.
func TestConnsConcurrent(t *testing.T) {
	const max = 4
	c := admission.NewConns(max)
	var held atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 500 {
				if !c.Acquire() {
					continue
				}
				if n := held.Add(1); n > max {
					t.Errorf("%d connections held, maximum %d", n, max)
				}
				held.Add(-1)
				c.Release()
			}
		})
	}
	wg.Wait()
	for i := range max {
		if !c.Acquire() {
			t.Fatalf("connection %d refused once all were released", i)
		}
	}
}

type conn struct{ id int }

type shared struct{ n int }

// A subject's connections are admitted up to the maximum, share what its first was given,
// and are listed; its last released takes the entry with it, and its next connection starts
// afresh.
func TestSubjectsRegistry(t *testing.T) {
	made := 0
	r := admission.NewSubjects[*conn](2, func() *shared { made++; return &shared{made} })
	a, b, c, d := &conn{1}, &conn{2}, &conn{3}, &conn{4}
	sa, ok := r.Acquire("alice", a)
	if !ok {
		t.Fatal("alice's first connection refused")
	}
	if sb, ok := r.Acquire("alice", b); !ok || sb != sa {
		t.Fatalf("alice's second connection: ok %v, shared %v, want %v", ok, sb, sa)
	}
	if _, ok := r.Acquire("alice", c); ok {
		t.Fatal("alice's third connection admitted with a maximum of 2")
	}
	if sd, ok := r.Acquire("bob", d); !ok || sd == sa {
		t.Fatalf("bob's connection: ok %v, shares alice's %v", ok, sd == sa)
	}
	if got := r.Conns("alice"); !slices.Equal(got, []*conn{a, b}) {
		t.Fatalf("alice's connections: %v", got)
	}
	if n := r.Len(); n != 2 {
		t.Fatalf("%d subjects, want alice and bob", n)
	}

	r.Release("alice", a)
	if got := r.Conns("alice"); !slices.Equal(got, []*conn{b}) {
		t.Fatalf("alice's connections after a's release: %v", got)
	}
	if sc, ok := r.Acquire("alice", c); !ok || sc != sa {
		t.Fatalf("alice's connection after a release: ok %v, shared %v, want %v", ok, sc, sa)
	}
	r.Release("alice", b)
	r.Release("alice", c)
	if got, n := r.Conns("alice"), r.Len(); got != nil || n != 1 {
		t.Fatalf("after alice's last release: connections %v, %d subjects, want none and bob", got, n)
	}
	if sa2, ok := r.Acquire("alice", a); !ok || sa2 == sa {
		t.Fatalf("alice again: ok %v, shares what went with her last connection %v", ok, sa2 == sa)
	}
	r.Release("carol", a) // no entry: nothing
	if n := r.Len(); n != 2 {
		t.Fatalf("%d subjects, want alice and bob", n)
	}
}

// Conns returns a copy: a release does not change a list already returned.
func TestSubjectsConnsIsACopy(t *testing.T) {
	r := admission.NewSubjects[*conn](3, func() *shared { return new(shared) })
	a, b := &conn{1}, &conn{2}
	r.Acquire("alice", a)
	r.Acquire("alice", b)
	got := r.Conns("alice")
	r.Release("alice", a)
	if !slices.Equal(got, []*conn{a, b}) {
		t.Fatalf("a listing changed by a release: %v", got)
	}
}

// Connections of a few subjects come and go at once: no subject passes its maximum, each
// connection is listed while held, and once all are released no subject is left.
func TestSubjectsConcurrent(t *testing.T) {
	const max, subjects = 3, 4
	r := admission.NewSubjects[*conn](max, func() *shared { return new(shared) })
	var held [subjects]atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			subject := string(rune('a' + g%subjects))
			h := &held[g%subjects]
			me := &conn{g}
			for range 300 {
				s, ok := r.Acquire(subject, me)
				if !ok {
					continue
				}
				if s == nil {
					t.Errorf("%s's connection %d admitted with nothing to share", subject, g)
				}
				if n := h.Add(1); n > max {
					t.Errorf("%d connections of %s held, maximum %d", n, subject, max)
				}
				if !slices.Contains(r.Conns(subject), me) {
					t.Errorf("%s's connection %d not listed while held", subject, g)
				}
				h.Add(-1)
				r.Release(subject, me)
			}
		})
	}
	wg.Wait()
	if n := r.Len(); n != 0 {
		t.Fatalf("%d subjects left once every connection was released", n)
	}
}
