package httpapi

import (
	"hash/maphash"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LimitRequests is the limit of a request that a SubjectRate refuses: the "limit" of its 429
// problem and the limit label of ballet_gateway_limit_rejections_total.
const LimitRequests = "rest_requests"

// RateOptions configure a SubjectRate. A nil *RateOptions means defaults.
type RateOptions struct {
	// Rate is the requests per second of one subject (BALLET_REST_RATE), in bursts of twice
	// that; zero means 50.
	Rate int
	// MaxSubjects is how many subjects are tracked at once; zero means 100,000. A subject
	// idle for two seconds is forgotten (its budget is full again by then); past the bound, a
	// request of a subject not tracked is refused like one beyond its rate, until one goes idle.
	MaxSubjects int
	// OnRefused, when set, is called for each refused request (the metric).
	OnRefused func()
}

// WithDefaults returns o with its zero fields set to their defaults.
func (o RateOptions) WithDefaults() RateOptions {
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.MaxSubjects <= 0 {
		o.MaxSubjects = 100_000
	}
	return o
}

// SubjectRate is a token bucket per subject: rate requests a second, up to twice that at once.
// Subjects are kept by a 64-bit hash of their name, so that an entry's size does not depend on
// the token's "sub" (two subjects whose hashes collide would share a budget). Safe for
// concurrent use; share one between surfaces to give a subject one budget for all of them.
type SubjectRate struct {
	o     RateOptions
	seed  maphash.Seed
	now   func() time.Time
	epoch time.Time // the buckets' times are since this, on the monotonic clock

	mu       sync.Mutex
	buckets  map[uint64]restBucket // guarded by mu; no pointers, for the collector
	lastTrim time.Duration         // guarded by mu: when idle buckets were last dropped
}

// rateIdle is how long an unused bucket of a burst of twice the rate takes to fill from
// empty, whatever the rate: past it, a bucket is as good as none.
const rateIdle = 2 * time.Second

// restBucket is one subject's budget: level tokens at last (since the epoch).
type restBucket struct {
	level float64
	last  time.Duration
}

// NewSubjectRate returns a SubjectRate with o's settings.
func NewSubjectRate(o *RateOptions) *SubjectRate {
	var opts RateOptions
	if o != nil {
		opts = *o
	}
	l := &SubjectRate{o: opts.WithDefaults(), seed: maphash.MakeSeed(), now: time.Now, buckets: map[uint64]restBucket{}}
	l.epoch = l.now()
	return l
}

// Admit spends one of subject's tokens: nil within its budget, else a 429 *Error that is
// Limited, whose Retry-After is when a token will be free (at least a second).
func (l *SubjectRate) Admit(subject string) error {
	key := maphash.String(l.seed, subject)
	rate, burst := float64(l.o.Rate), 2*float64(l.o.Rate)
	now := l.now().Sub(l.epoch)
	l.mu.Lock()
	defer l.mu.Unlock()
	if now-l.lastTrim >= rateIdle {
		l.trim(now)
	}
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.o.MaxSubjects {
			return l.refuse(rateIdle, "too many subjects are making requests at once")
		}
		b = restBucket{level: burst, last: now}
	}
	if d := now - b.last; d > 0 {
		b.level = min(burst, b.level+d.Seconds()*rate)
		b.last = now
	}
	if b.level >= 1 {
		b.level--
		l.buckets[key] = b
		return nil
	}
	l.buckets[key] = b
	wait := time.Duration((1 - b.level) / rate * float64(time.Second))
	return l.refuse(wait, "more than "+strconv.Itoa(l.o.Rate)+" requests a second")
}

// trim forgets the buckets that have been idle long enough to be full.
func (l *SubjectRate) trim(now time.Duration) {
	for k, b := range l.buckets {
		if now-b.last >= rateIdle {
			delete(l.buckets, k)
		}
	}
	l.lastTrim = now
}

// Tracked reports how many subjects l holds a budget for.
func (l *SubjectRate) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

func (l *SubjectRate) refuse(retry time.Duration, why string) error {
	if l.o.OnRefused != nil {
		l.o.OnRefused()
	}
	return &rateError{err: Error{Status: http.StatusTooManyRequests, Detail: "rate limit exceeded: " + why},
		max: l.o.Rate, retry: max(retry, time.Second)}
}

// rateError is the 429 of a request beyond its subject's rate: an *Error whose problem names
// the limit and the rate, with Retry-After.
type rateError struct {
	err   Error
	max   int
	retry time.Duration
}

func (e *rateError) Error() string { return e.err.Detail }

func (e *rateError) Unwrap() error { return &e.err }

func (e *rateError) Limited() (string, int, time.Duration) { return LimitRequests, e.max, e.retry }
