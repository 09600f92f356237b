package planner

import (
	"math/rand/v2"
	"testing"
)

// The ring keeps the order of what is put through growing, wrapping and shrinking, refuses
// an output past the bound, and is back to its fewest slots once empty.
func TestOutputQueue(t *testing.T) {
	const bound = 100
	var q outputQueue
	q.cond.L = &q.mu
	r := rand.New(rand.NewPCG(1, 2))
	next, want := int64(1), int64(1)
	refused := 0
	for i := range 20_000 {
		// Phases that mostly put, then mostly take: the queue fills to its bound and empties.
		if r.IntN(10) < 3+4*(i/500%2) {
			ok := q.put(Output{Seq: next}, bound)
			switch {
			case ok != (next-want < bound):
				t.Fatalf("put with %d queued: %v", next-want, ok)
			case ok:
				next++
			default:
				refused++
			}
			continue
		}
		o, ok := q.take()
		if ok != (want < next) || ok && o.Seq != want {
			t.Fatalf("take: %d, %v; want %d with %d queued", o.Seq, ok, want, next-want)
		}
		if ok {
			want++
		}
		if len(q.buf) > minQueue && q.n*4 < len(q.buf) {
			t.Fatalf("%d outputs in %d slots", q.n, len(q.buf))
		}
	}
	if refused == 0 {
		t.Fatal("the queue never reached its bound")
	}
	for want < next {
		if o, _ := q.take(); o.Seq != want {
			t.Fatalf("take %d, want %d", o.Seq, want)
		}
		want++
	}
	if len(q.buf) != minQueue {
		t.Fatalf("%d slots once empty, want %d", len(q.buf), minQueue)
	}
	q.put(Output{Seq: next}, bound)
	q.close(false)
	if !q.wait() {
		t.Fatal("wait reports nothing queued after close")
	}
	if o, _ := q.take(); o.Seq != next || q.wait() {
		t.Fatalf("after close: took %d, then wait reports more", o.Seq)
	}
}
