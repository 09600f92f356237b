package planner

import (
	"testing"
	"time"
)

// TestWindowLimit: at most max events of a subject in any window, the retry is when the oldest
// leaves it, other subjects are apart, and subjects without recent events are forgotten.
func TestWindowLimit(t *testing.T) {
	l := newWindowLimit(3, time.Minute)
	t0 := time.Unix(1_000_000, 0)
	for i, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
		if _, ok := l.take("alice", t0.Add(at)); !ok {
			t.Fatalf("event %d refused", i+1)
		}
	}
	if retry, ok := l.take("alice", t0.Add(30*time.Second)); ok || retry != 30*time.Second {
		t.Fatalf("the fourth in a minute: ok %v, retry %v; want refused, 30s", ok, retry)
	}
	if _, ok := l.take("bob", t0.Add(30*time.Second)); !ok {
		t.Fatal("another subject refused")
	}
	// The first event leaves the window a minute after it: one place is free, not more.
	if _, ok := l.take("alice", t0.Add(time.Minute+time.Millisecond)); !ok {
		t.Fatal("refused after the oldest left the window")
	}
	if retry, ok := l.take("alice", t0.Add(time.Minute+2*time.Millisecond)); ok || retry != 10*time.Second-2*time.Millisecond {
		t.Fatalf("one more: ok %v, retry %v", ok, retry)
	}
	if _, ok := l.take("carol", t0.Add(3*time.Minute)); !ok || len(l.times) != 1 {
		t.Fatalf("subjects kept after their window: %d", len(l.times))
	}
}
