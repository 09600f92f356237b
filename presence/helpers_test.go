package presence_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/internal/subscribers"
	"github.com/ballet/gateway/presence"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// window is the coalescing window of the tests' registries.
const window = 40 * time.Millisecond

// shared is the state several replicas share, as the database holds it: each replica's
// counts, and the notifications between them.
type shared struct {
	mu       sync.Mutex
	rows     map[string]map[[2]string]int // replica → (stream, subject) → connections
	replicas map[string]*replica
	fail     bool
}

func newShared() *shared {
	return &shared{rows: map[string]map[[2]string]int{}, replicas: map[string]*replica{}}
}

// replica is one replica's presence.Store on shared.
type replica struct {
	sh   *shared
	id   string
	subs subscribers.Set[[]string]
}

func (sh *shared) replica(id string) *replica {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := &replica{sh: sh, id: id}
	sh.replicas[id] = r
	sh.rows[id] = map[[2]string]int{}
	return r
}

// kill removes a replica's rows, as the others' sweep does when it dies, and tells them.
func (sh *shared) kill(id string) {
	sh.mu.Lock()
	var streams []string
	for k := range sh.rows[id] {
		streams = append(streams, k[0])
	}
	delete(sh.rows, id)
	others := sh.others(id)
	sh.mu.Unlock()
	for _, o := range others {
		o.notify(streams)
	}
}

func (sh *shared) others(id string) []*replica {
	var out []*replica
	for rid, r := range sh.replicas {
		if rid != id {
			out = append(out, r)
		}
	}
	return out
}

func (r *replica) Flush(_ context.Context, counts []presence.Count) error {
	r.sh.mu.Lock()
	if r.sh.fail {
		r.sh.mu.Unlock()
		return fmt.Errorf("store down")
	}
	rows := r.sh.rows[r.id]
	var changed []string
	for _, c := range counts {
		k := [2]string{c.Stream, c.Subject}
		if (rows[k] == 0) != (c.Connections == 0) {
			changed = append(changed, c.Stream)
		}
		if c.Connections == 0 {
			delete(rows, k)
		} else {
			rows[k] = c.Connections
		}
	}
	others := r.sh.others(r.id)
	r.sh.mu.Unlock()
	if len(changed) > 0 {
		for _, o := range others {
			o.notify(changed)
		}
	}
	return nil
}

func (r *replica) Read(_ context.Context, streams []string, limit int) (map[string]map[string]int, error) {
	r.sh.mu.Lock()
	defer r.sh.mu.Unlock()
	if r.sh.fail {
		return nil, fmt.Errorf("store down")
	}
	out := map[string]map[string]int{}
	for _, st := range streams {
		m := map[string]int{}
		for rid, rows := range r.sh.rows {
			if rid == r.id {
				continue
			}
			for k, n := range rows {
				if k[0] == st {
					m[k[1]] += n
				}
			}
		}
		keys := slices.Sorted(maps.Keys(m))
		for _, k := range keys[min(len(keys), limit+1):] {
			delete(m, k)
		}
		out[st] = m
	}
	return out, nil
}

func (r *replica) Subscribe(fn func([]string)) func() { return r.subs.Subscribe(fn) }

func (r *replica) notify(streams []string) { r.subs.Publish(streams) }

func newRegistry(t *testing.T, store presence.Store, o presence.Options) *presence.Registry {
	t.Helper()
	if o.Window == 0 {
		o.Window = window
	}
	o.Store = store
	r := presence.New(&o)
	t.Cleanup(func() { r.Close() })
	return r
}

// sink records the notices of one presence subscription.
type sink struct {
	ch   chan *presence.Notice
	lost chan struct{}
	full bool // refuse notices
}

func newSink() *sink {
	return &sink{ch: make(chan *presence.Notice, 1000), lost: make(chan struct{}, 1)}
}

func (s *sink) PresenceChanged(n *presence.Notice) bool {
	if s.full {
		return false
	}
	s.ch <- n
	return true
}

func (s *sink) PresenceLost() { s.lost <- struct{}{} }

// next returns the next notice, failing after 30 s.
func (s *sink) next(t *testing.T) *presence.Notice {
	t.Helper()
	select {
	case n := <-s.ch:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no presence notice within 30 s")
		return nil
	}
}

// want expects the next notice to be exactly joined and left.
func (s *sink) want(t *testing.T, joined, left []string) {
	t.Helper()
	n := s.next(t)
	if !slices.Equal(n.Joined, joined) || !slices.Equal(n.Left, left) {
		t.Fatalf("notice joined %v left %v, want joined %v left %v", n.Joined, n.Left, joined, left)
	}
}

// quiet expects no notice for d (several windows: nothing is pending).
func (s *sink) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case n := <-s.ch:
		t.Fatalf("unexpected notice joined %v left %v", n.Joined, n.Left)
	case <-time.After(d):
	}
}

// bodies decodes a notice's presence.changed params in c.
func bodies(t *testing.T, n *presence.Notice, c codec.Codec) []map[string]any {
	t.Helper()
	bs, err := n.Bodies(c)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, b := range bs {
		var m map[string]any
		if err := c.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}
