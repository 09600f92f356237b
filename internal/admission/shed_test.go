package admission_test

import (
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/admission"
)

// The replica's queued-bytes budget: the setting, else a quarter of the Go memory limit,
// else 1 GiB.
func TestQueueBudgetDefault(t *testing.T) {
	budget := func(setting int64) int64 {
		return admission.NewShedder(&admission.ShedOptions[*fakeConn]{Budget: setting}).Budget()
	}
	prev := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	if got := budget(0); got != 1<<30 {
		t.Errorf("without a memory limit: %d, want 1 GiB", got)
	}
	debug.SetMemoryLimit(1800 << 20)
	if got := budget(0); got != 450<<20 {
		t.Errorf("with a 1800 MiB memory limit: %d, want a quarter, 450 MiB", got)
	}
	if got := budget(64 << 20); got != 64<<20 {
		t.Errorf("set to 64 MiB: %d", got)
	}
}

// fakeConn is a connection with bytes queued; a shed one lets them go after its close
// handshake (letGo; never when negative), as a session does.
type fakeConn struct {
	name    string
	queued  atomic.Int64
	closing atomic.Bool
}

// fakeReplica is a replica's connections and the shedder of them.
type fakeReplica struct {
	conns   []*fakeConn
	letGo   time.Duration // how long a shed connection keeps its bytes; negative: for ever
	rounds  int           // Conns calls: written by the shedder's goroutine alone, unlocked
	mu      sync.Mutex
	shed    []string // guarded by mu
	shedder *admission.Shedder[*fakeConn]
	wg      sync.WaitGroup // the let-go timers' callbacks
}

func newFakeReplica(t *testing.T, budget int64, letGo time.Duration, queued ...int64) *fakeReplica {
	r := &fakeReplica{letGo: letGo}
	for i, q := range queued {
		c := &fakeConn{name: string(rune('a' + i))}
		c.queued.Store(q)
		r.conns = append(r.conns, c)
	}
	r.shedder = admission.NewShedder(&admission.ShedOptions[*fakeConn]{
		Budget: budget,
		Total:  r.total,
		Conns: func() []*fakeConn {
			r.rounds++
			return r.conns
		},
		Queued:  func(c *fakeConn) int64 { return c.queued.Load() },
		Closing: func(c *fakeConn) bool { return c.closing.Load() },
		Shed: func(c *fakeConn, queued int64) {
			if queued <= 0 || c.closing.Swap(true) {
				t.Errorf("shed %s, closing already or with %d bytes queued", c.name, queued)
			}
			r.mu.Lock()
			r.shed = append(r.shed, c.name)
			r.mu.Unlock()
			if r.letGo < 0 {
				return
			}
			r.wg.Add(1)
			time.AfterFunc(r.letGo, func() {
				defer r.wg.Done()
				c.queued.Store(0)
			})
		},
	})
	t.Cleanup(func() {
		r.shedder.Close()
		r.wg.Wait()
	})
	return r
}

func (r *fakeReplica) total() int64 {
	var n int64
	for _, c := range r.conns {
		n += c.queued.Load()
	}
	return n
}

func (r *fakeReplica) shedNames() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.shed, "")
}

// shedders counts the goroutines shedders started that have not ended (started or not yet).
func shedders() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "created by github.com/ballet/gateway/internal/admission.(*Shedder[")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// noShedders waits for every shedder's goroutine to end, and fails if one is left.
func noShedders(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for shedders() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d shedder goroutines left", shedders())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Past its budget the shedder closes the connections with the most queued until what is
// left, counting those already closing as gone, is under three quarters of it; then its
// goroutine ends by itself.
func TestShedderShedsTheMostBehind(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued []int64
		want   string
	}{
		// 1150 of 1000: down to 750 is 400, which a's 500 covers.
		{"one is enough", []int64{300, 500, 200, 100, 50}, "b"},
		// 1600 of 1000: 850 to go, b's 500 and a's 400.
		{"most first", []int64{400, 500, 300, 200, 100, 100}, "ba"},
		// 1400 of 1000: 650 to go, e, d and c in turn.
		{"as many as it takes", []int64{250, 260, 270, 280, 290, 50}, "edc"},
		// Nothing queued is nobody shed, however far over the rest is.
		{"the empty stay", []int64{0, 2000, 0}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFakeReplica(t, 1000, 0, tc.queued...)
			r.shedder.Over()
			noShedders(t)
			if got := r.shedNames(); got != tc.want {
				t.Fatalf("shed %q, want %q", got, tc.want)
			}
		})
	}
}

// A connection already closing holds its bytes until its close handshake ends: the next
// rounds count them as gone, and shed no one more for them.
func TestShedderCountsTheClosingAsGone(t *testing.T) {
	// 1300 of 1000: a's 600 covers the 550 to go; it holds them for 200 ms, 8 pauses.
	r := newFakeReplica(t, 1000, 200*time.Millisecond, 600, 300, 200, 200)
	r.conns[3].closing.Store(true) // d, closing already: 200 of them count as gone
	r.shedder.Over()
	noShedders(t)
	r.shedder.Close() // after the goroutine's last round: rounds may be read
	if got := r.shedNames(); got != "a" {
		t.Fatalf("shed %q, want only a", got)
	}
	if r.rounds < 2 {
		t.Fatalf("%d rounds, want one for each pause while a held its bytes", r.rounds)
	}
}

// Over while the shedder runs starts no second goroutine; once under the budget the
// goroutine ends, and Over starts another the next time. Rounds never overlap: the race
// detector sees to it, as each counts rounds unlocked.
func TestShedderOneAtATime(t *testing.T) {
	const conns, senders, sends = 64, 8, 400
	queued := make([]int64, conns)
	r := newFakeReplica(t, 4000, time.Millisecond, queued...)
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			for j := range sends {
				c := r.conns[(i*sends+j)%conns]
				if c.closing.Load() {
					continue
				}
				c.queued.Add(100)
				if r.total() > 4000 {
					r.shedder.Over()
				}
			}
		})
	}
	wg.Wait()
	noShedders(t)
	r.shedder.Close() // after the goroutine's last round: rounds may be read
	if total := r.total(); total > 4000 {
		t.Fatalf("%d queued once the shedder ended, over the budget of 4000", total)
	}
	if r.rounds == 0 || r.shedNames() == "" {
		t.Fatalf("%d rounds shed %q: the senders passed the budget and nobody was shed", r.rounds, r.shedNames())
	}
}

// Close stops a shedder that cannot get under its budget, and waits for it; Over starts
// none afterwards; Close again does nothing.
func TestShedderClose(t *testing.T) {
	r := newFakeReplica(t, 1000, -1, 2000, 2000) // the shed never let go
	r.shedder.Over()
	deadline := time.Now().Add(5 * time.Second)
	for r.shedNames() != "ab" {
		if time.Now().After(deadline) {
			t.Fatalf("shed %q, want both", r.shedNames())
		}
		time.Sleep(time.Millisecond)
	}
	if n := shedders(); n != 1 {
		t.Fatalf("%d shedder goroutines while over the budget, want 1", n)
	}
	r.shedder.Close()
	noShedders(t) // Close returns as the goroutine does
	r.shedder.Over()
	if n := shedders(); n != 0 {
		t.Fatalf("Over after Close started %d shedder goroutines", n)
	}
	r.shedder.Close()
}

// Close racing Over from many goroutines leaves no goroutine behind.
func TestShedderCloseWhileOver(t *testing.T) {
	for range 20 {
		r := newFakeReplica(t, 100, time.Millisecond, 300, 200, 100)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					r.shedder.Over()
				}
			})
		}
		wg.Go(r.shedder.Close)
		wg.Wait()
		r.shedder.Close()
		noShedders(t)
	}
}
