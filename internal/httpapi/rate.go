package httpapi

import (
	"hash/maphash"
	"net/http"
	"net/netip"
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
	// Limit names the limit in a refusal's problem and metric label; empty means LimitRequests.
	Limit string
}

// WithDefaults returns o with its zero fields set to their defaults.
func (o RateOptions) WithDefaults() RateOptions {
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.MaxSubjects <= 0 {
		o.MaxSubjects = 100_000
	}
	if o.Limit == "" {
		o.Limit = LimitRequests
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
	return l.take(maphash.String(l.seed, subject), spend)
}

// AdmitAddr spends one of a client address's tokens, as Admit a subject's; the caller keys
// the address as it counts them (an IPv6 address's /64, say).
func (l *SubjectRate) AdmitAddr(a netip.Addr) error {
	return l.take(maphash.Comparable(l.seed, a), spend)
}

// CheckAddr refuses an address whose failures (ChargeAddr) have spent more than its budget,
// as Admit does but spending nothing: a request that is then verified and found valid costs
// the address nothing, and a client whose requests succeed is never refused by it.
func (l *SubjectRate) CheckAddr(a netip.Addr) error {
	return l.take(maphash.Comparable(l.seed, a), check)
}

// ChargeAddr spends one of an address's tokens for a failure, refusing nothing: below zero
// the address owes them, down to minus its burst, and CheckAddr refuses it until it has paid.
func (l *SubjectRate) ChargeAddr(a netip.Addr) { _ = l.take(maphash.Comparable(l.seed, a), charge) }

// What take does with a token.
const (
	spend  = iota // one is taken, or the request refused
	check         // none is taken; refused while the budget is below zero
	charge        // one is taken, down to minus the burst; never refused
)

func (l *SubjectRate) take(key uint64, mode int) error {
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
			if mode == charge {
				return nil
			}
			return l.refuse(rateIdle, "too many clients are making requests at once")
		}
		if mode == check {
			return nil // a full budget: nothing to keep
		}
		b = restBucket{level: burst, last: now}
	}
	if d := now - b.last; d > 0 {
		b.level = min(burst, b.level+d.Seconds()*rate)
		b.last = now
	}
	need := 1.0
	switch {
	case mode == charge:
		b.level = max(-burst, b.level-1)
		l.buckets[key] = b
		return nil
	case mode == check:
		need = 0
	case b.level >= 1:
		b.level--
		l.buckets[key] = b
		return nil
	}
	l.buckets[key] = b
	if b.level >= need {
		return nil
	}
	wait := time.Duration((need - b.level) / rate * float64(time.Second))
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
		limit: l.o.Limit, max: l.o.Rate, retry: max(retry, time.Second)}
}

// rateError is the 429 of a request beyond its subject's rate: an *Error whose problem names
// the limit and the rate, with Retry-After.
type rateError struct {
	err   Error
	limit string
	max   int
	retry time.Duration
}

func (e *rateError) Error() string { return e.err.Detail }

func (e *rateError) Unwrap() error { return &e.err }

func (e *rateError) Limited() (string, int, time.Duration) { return e.limit, e.max, e.retry }

// WriteProblem answers err, a refusal of a limit (a SubjectRate's, say) or an *Error, as every
// REST surface does: an RFC 7807 problem, with Retry-After when the limit says when.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	New(Config{Name: "rest"}, nil).problem(w, r, err)
}
