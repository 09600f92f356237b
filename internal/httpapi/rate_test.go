package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/heaptest"
)

// fakeClock is a SubjectRate's clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newRate(o RateOptions) (*SubjectRate, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_000_000, 0)}
	l := NewSubjectRate(&o)
	l.now, l.epoch = c.now, c.t
	return l, c
}

// refusal checks that err is the 429 of a subject's rate, with a Retry-After of whole seconds.
func refusal(t *testing.T, err error, rate int) time.Duration {
	t.Helper()
	var e *Error
	var lim Limited
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || !errors.As(err, &lim) {
		t.Fatalf("got %v, want a 429", err)
	}
	name, max, retry := lim.Limited()
	if name != LimitRequests || max != rate || retry < time.Second {
		t.Fatalf("Limited() = %q %d %v", name, max, retry)
	}
	return retry
}

func TestSubjectRateBurstThenRate(t *testing.T) {
	refused := 0
	l, clock := newRate(RateOptions{Rate: 5, OnRefused: func() { refused++ }})
	for i := 0; i < 10; i++ {
		if err := l.Admit("alice"); err != nil {
			t.Fatalf("request %d of the burst: %v", i, err)
		}
	}
	refusal(t, l.Admit("alice"), 5)
	if err := l.Admit("bob"); err != nil {
		t.Fatalf("another subject: %v", err)
	}
	clock.add(200 * time.Millisecond) // one token at 5 a second
	if err := l.Admit("alice"); err != nil {
		t.Fatalf("after a token's time: %v", err)
	}
	refusal(t, l.Admit("alice"), 5)
	if refused != 2 {
		t.Fatalf("OnRefused called %d times, want 2", refused)
	}
}

func TestSubjectRateForgetsIdleSubjects(t *testing.T) {
	l, clock := newRate(RateOptions{Rate: 1})
	for i := 0; i < 100; i++ {
		if err := l.Admit("s" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	clock.add(rateIdle)
	if err := l.Admit("last"); err != nil {
		t.Fatal(err)
	}
	if n := l.Tracked(); n != 1 {
		t.Fatalf("%d subjects tracked after the others idled, want 1", n)
	}
}

// Past MaxSubjects a subject not tracked is refused until a tracked one idles; the tracked
// ones keep their budgets.
func TestSubjectRateMaxSubjects(t *testing.T) {
	l, clock := newRate(RateOptions{Rate: 10, MaxSubjects: 3})
	for _, s := range []string{"a", "b", "c"} {
		if err := l.Admit(s); err != nil {
			t.Fatal(err)
		}
	}
	if retry := refusal(t, l.Admit("d"), 10); retry != rateIdle {
		t.Fatalf("Retry-After %v for an untracked subject, want %v", retry, rateIdle)
	}
	if err := l.Admit("a"); err != nil {
		t.Fatalf("a tracked subject: %v", err)
	}
	clock.add(rateIdle)
	if err := l.Admit("d"); err != nil {
		t.Fatalf("once the others idled: %v", err)
	}
}

// A subject's entry holds a hash, not the name: 20,000 subjects of 4 KB names hold well under
// what their names would.
func TestSubjectRateBytesDoNotDependOnNames(t *testing.T) {
	const n, size = 20_000, 4 << 10
	l, _ := newRate(RateOptions{})
	pad := strings.Repeat("x", size)
	before := heaptest.LiveHeap()
	for i := 0; i < n; i++ {
		if err := l.Admit(pad + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	grew := heaptest.LiveHeap() - before
	if l.Tracked() != n {
		t.Fatalf("%d tracked, want %d", l.Tracked(), n)
	}
	if limit := int64(n * 200); grew > limit {
		t.Fatalf("the heap grew %d bytes for %d subjects, more than %d (the names are %d bytes)", grew, n, limit, n*size)
	}
	t.Logf("%d subjects: %d bytes (%d each)", n, grew, grew/n)
}
