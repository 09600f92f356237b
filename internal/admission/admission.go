package admission

import (
	"sync"
	"time"
)

// epoch makes the budgets' clock monotonic: a wall clock set back would stop them refilling.
var epoch = time.Now()

// Now is the budgets' clock in ns, never 0 (a bucket's "never used").
func Now() int64 { return int64(time.Since(epoch)) + 1 }

// Bucket is a token bucket whose level may fall below zero: a debt, which refills like any
// level. Its zero value is full.
type Bucket struct {
	level float64
	last  int64 // Now of the last fill; 0: never filled, full
}

// Fill adds what rate has brought since the last fill, up to burst.
func (b *Bucket) Fill(now int64, rate, burst float64) {
	switch {
	case b.last == 0:
		b.level = burst
	case now > b.last:
		b.level = min(burst, b.level+float64(now-b.last)*rate/1e9)
	default:
		return
	}
	b.last = now
}

// Until is how long rate takes to bring the level to want.
func (b *Bucket) Until(want, rate float64) time.Duration {
	if b.level >= want {
		return 0
	}
	return time.Duration((want - b.level) / rate * 1e9)
}

// Spend takes n from the level, into a debt if need be.
func (b *Bucket) Spend(n float64) { b.level -= n }

// Limiter is a budget of frames, a connection's or a subject's: a token bucket that fills at
// rate per second up to twice that. A frame beyond it is refused, and refusals have a budget of
// the same size; past it a refusal is owed, and the reader waits until it is paid before
// refusing and reading on, so a flood costs the server no more than twice the rate in frames
// and TCP holds the peer back. Shared by several readers (a subject's connections), each waits
// its own turn. Safe for concurrent use.
type Limiter struct {
	mu               sync.Mutex
	tokens, refusals Bucket
}

// Take spends a token for one frame. It reports whether the frame is within the budget; when
// it is not, wait is how long the reader must wait before refusing it (0 while refusals are
// within their budget), and retry how long after that refusal a token will be free.
func (b *Limiter) Take(rate int) (ok bool, wait, retry time.Duration) {
	r, burst := float64(rate), 2*float64(rate)
	now := Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens.Fill(now, r, burst)
	b.refusals.Fill(now, r, burst)
	if b.tokens.level >= 1 {
		b.tokens.level--
		return true, 0, 0
	}
	b.refusals.level--
	wait = b.refusals.Until(0, r)
	return false, wait, max(b.tokens.Until(1, r)-wait, time.Millisecond)
}

// Replay is a subject's budget of events replayed from the log, filled at rate events per
// second up to burst. Safe for concurrent use.
type Replay struct {
	mu     sync.Mutex
	bucket Bucket
}

// Retry reports how long until the subject may replay again: 0 while the budget is not
// overdrawn.
func (b *Replay) Retry(rate, burst float64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket.Fill(Now(), rate, burst)
	if d := b.bucket.Until(0, rate); d > 0 {
		return max(d, time.Millisecond)
	}
	return 0
}

// Charge spends n events of the budget.
func (b *Replay) Charge(rate, burst float64, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket.Fill(Now(), rate, burst)
	b.bucket.Spend(float64(n))
}
