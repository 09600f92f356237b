package admission_test

import (
	"testing"
	"time"

	"github.com/ballet/gateway/internal/admission"
)

// A limiter admits its burst, twice the rate, then refuses; its refusals have a budget of the
// same size, past which each refusal waits.
func TestLimiterBurstThenRefusals(t *testing.T) {
	var l admission.Limiter
	const rate = 5
	for i := range 2 * rate {
		if ok, _, _ := l.Take(rate); !ok {
			t.Fatalf("frame %d refused within the burst", i)
		}
	}
	ok, wait, retry := l.Take(rate)
	if ok || wait != 0 || retry <= 0 {
		t.Fatalf("past the burst: ok %v, wait %v, retry %v; want a refusal without a wait", ok, wait, retry)
	}
	for range 2*rate - 1 {
		l.Take(rate)
	}
	if ok, wait, _ := l.Take(rate); ok || wait <= 0 {
		t.Fatalf("past the refusals' budget: ok %v, wait %v; want a wait", ok, wait)
	}
}

// A bucket in debt refills to zero in the time the rate takes.
func TestBucketDebt(t *testing.T) {
	var b admission.Bucket
	now := admission.Now()
	b.Fill(now, 10, 10)
	b.Spend(15)
	if d := b.Until(0, 10); d != 500*time.Millisecond {
		t.Fatalf("a debt of 5 at 10/s: %v, want 500ms", d)
	}
	b.Fill(now+int64(500*time.Millisecond), 10, 10)
	if d := b.Until(0, 10); d != 0 {
		t.Fatalf("after 500ms: %v, want 0", d)
	}
}

// A replay budget overdrawn by a replay refuses the next until it has refilled.
func TestReplayOverdrawn(t *testing.T) {
	var r admission.Replay
	if d := r.Retry(100, 200); d != 0 {
		t.Fatalf("a fresh budget: retry %v", d)
	}
	r.Charge(100, 200, 300)
	if d := r.Retry(100, 200); d < 900*time.Millisecond || d > time.Second {
		t.Fatalf("overdrawn by 100 at 100/s: retry %v, want about 1s", d)
	}
}
