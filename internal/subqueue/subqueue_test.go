package subqueue

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A flood from many senders never has more than the limit queued, every frame refused is
// refused whole, and the queue is empty once the connection wrote what it took.
func TestFloodStaysWithinLimit(t *testing.T) {
	const limit, senders, tries = 16, 8, 2000
	q := New(limit)
	frames := make(chan func(), limit)
	var queued, most, taken atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tries {
				n := 1 + i%3
				room, ok := q.Reserve(n)
				if !ok {
					if room >= n && !q.Closed() {
						t.Errorf("refused %d with room %d", n, room)
					}
					continue
				}
				if room < n {
					t.Errorf("reserved %d with room %d", n, room)
				}
				now := queued.Add(int64(n))
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				taken.Add(int64(n))
				for range n {
					frames <- func() { queued.Add(-1); q.Written()() }
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { // the connection: writes frames in its own time
		for f := range frames {
			f()
		}
		close(done)
	}()
	wg.Wait()
	close(frames)
	<-done
	if m := most.Load(); m > limit {
		t.Fatalf("%d frames queued at once, limit %d", m, limit)
	}
	if taken.Load() == 0 {
		t.Fatal("no frame was taken")
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("%d frames left queued after all were written", n)
	}
}

// Reserve is all or none and says the room there was; Unreserve gives a refused claim back.
func TestReserveAllOrNone(t *testing.T) {
	q := New(4)
	if room, ok := q.Reserve(3); !ok || room != 4 {
		t.Fatalf("Reserve(3) = %d, %v; want 4, true", room, ok)
	}
	if room, ok := q.Reserve(2); ok || room != 1 {
		t.Fatalf("Reserve(2) with 1 free = %d, %v; want 1, false", room, ok)
	}
	if q.Len() != 3 || q.Room() != 1 {
		t.Fatalf("len %d room %d after a refused claim, want 3 and 1", q.Len(), q.Room())
	}
	q.Unreserve(3)
	if q.Len() != 0 || q.Room() != 4 || q.Limit() != 4 {
		t.Fatalf("len %d room %d limit %d after Unreserve, want 0, 4, 4", q.Len(), q.Room(), q.Limit())
	}
	if _, ok := New(0).Reserve(1); ok {
		t.Fatal("a queue of limit 0 took a frame")
	}
}

// Close refuses every later claim, once; frames queued before still count down as written.
func TestCloseRefusesAndDrains(t *testing.T) {
	q := New(4)
	q.Reserve(2)
	if !q.Close() || q.Close() {
		t.Fatal("Close: want true once, then false")
	}
	if !q.Closed() {
		t.Fatal("Closed after Close is false")
	}
	if _, ok := q.Reserve(1); ok {
		t.Fatal("a closed queue took a frame")
	}
	q.Written()()
	q.Written()()
	if q.Len() != 0 || !q.Closed() {
		t.Fatalf("len %d closed %v after the frames were written, want 0 and closed", q.Len(), q.Closed())
	}
}

func expectBlocked(t *testing.T, waited chan error) {
	t.Helper()
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v with the queue full", err)
	case <-time.After(20 * time.Millisecond):
	}
}

func expectReturned(t *testing.T, waited chan error, want error) {
	t.Helper()
	select {
	case err := <-waited:
		if !errors.Is(err, want) {
			t.Fatalf("Wait: %v, want %v", err, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return")
	}
}
