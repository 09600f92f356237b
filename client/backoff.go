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
