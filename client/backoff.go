package client

import (
	"math/rand/v2"
	"time"
)

// backoff yields reconnect delays: exponential growth from min up to max,
// with full jitter (a uniform draw between zero and the current ceiling) so
// that clients dropped together do not return together.
type backoff struct {
	min, max time.Duration
	attempt  int
}

func (b *backoff) next() time.Duration {
	ceil := b.max
	if b.attempt < 32 {
		if c := b.min << b.attempt; c > 0 && c < b.max {
			ceil = c
		}
	}
	b.attempt++
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil + 1)
}

// ceiling yields a delay from the upper half of max, with jitter, and
// keeps later delays at max: for a refusal that only time repairs.
func (b *backoff) ceiling() time.Duration {
	b.attempt = 32
	half := b.max / 2
	return half + rand.N(b.max-half+1)
}
