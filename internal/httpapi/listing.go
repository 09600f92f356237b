package httpapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The limits of listings in flight: the "limit" of their 429 problems and the limit labels of
// ballet_gateway_limit_rejections_total.
const (
	// LimitListings refuses a subject's listing beyond its listings in flight
	// (BALLET_REST_LISTINGS_PER_SUBJECT).
	LimitListings = "rest_listings"
	// LimitReplicaListings refuses a listing beyond the replica's listings in flight
	// (BALLET_REST_MAX_LISTINGS).
	LimitReplicaListings = "rest_listings_replica"
)

// Bounds of a listing's page in bytes (BALLET_REST_PAGE_BYTES).
const (
	DefaultPageBytes = 1 << 20
	// MinPageBytes is the least page budget: a page of MaxPageLimit planner sessions, the
	// largest entries without a budget of their own, always fits in it.
	MinPageBytes = 1 << 20
)

// listingRetry is the Retry-After of a listing refused while others are answered: a page
// streams in well under a second to a client that reads it.
const listingRetry = time.Second

// ListingOptions configure Listings. A nil *ListingOptions means defaults.
type ListingOptions struct {
	// PerSubject is how many listings of one subject are answered at once
	// (BALLET_REST_LISTINGS_PER_SUBJECT); zero means 4.
	PerSubject int
	// Replica is how many listings of all subjects are answered at once
	// (BALLET_REST_MAX_LISTINGS); zero means 32.
	Replica int
	// PageBytes is what one page holds of its entries' text, at least one entry whatever its
	// size (BALLET_REST_PAGE_BYTES); zero means DefaultPageBytes, and less than MinPageBytes
	// is MinPageBytes.
	PageBytes int
	// OnRefused, when set, is called with the limit of each refused listing (the metric).
	OnRefused func(limit string)
	// OnInFlight, when set, is called with +1 when a listing starts and -1 when it ends.
	OnInFlight func(delta int)
}

// WithDefaults returns o with its zero fields set to their defaults.
func (o ListingOptions) WithDefaults() ListingOptions {
	if o.PerSubject <= 0 {
		o.PerSubject = 4
	}
	if o.Replica <= 0 {
		o.Replica = 32
	}
	if o.PageBytes <= 0 {
		o.PageBytes = DefaultPageBytes
	}
	o.PageBytes = max(o.PageBytes, MinPageBytes)
	return o
}

// Listings bounds the listings (paged answers and transcripts) answered at once, per subject
// and for the replica, so that what clients that do not read their answers make the replica
// hold is at most Replica pages of PageBytes. Safe for concurrent use; share one between
// surfaces for one budget.
type Listings struct {
	o ListingOptions

	mu        sync.Mutex
	total     int            // guarded by mu
	bySubject map[string]int // guarded by mu: the subjects with a listing in flight
}

// NewListings returns Listings with o's settings.
func NewListings(o *ListingOptions) *Listings {
	var opts ListingOptions
	if o != nil {
		opts = *o
	}
	return &Listings{o: opts.WithDefaults(), bySubject: map[string]int{}}
}

// PageBytes is the budget of one page's entries.
func (l *Listings) PageBytes() int { return l.o.PageBytes }

// Acquire takes a place for one listing of subject: release gives it back (once), or a 429
// *Error that is Limited when subject, or the replica, answers as many listings as it may.
func (l *Listings) Acquire(subject string) (release func(), err error) {
	l.mu.Lock()
	switch {
	case l.bySubject[subject] >= l.o.PerSubject:
		l.mu.Unlock()
		return nil, l.refuse(LimitListings, l.o.PerSubject, "listings of one subject")
	case l.total >= l.o.Replica:
		l.mu.Unlock()
		return nil, l.refuse(LimitReplicaListings, l.o.Replica, "listings on this replica")
	}
	l.bySubject[subject]++
	l.total++
	l.mu.Unlock()
	if l.o.OnInFlight != nil {
		l.o.OnInFlight(1)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.bySubject[subject]--; l.bySubject[subject] <= 0 {
				delete(l.bySubject, subject)
			}
			l.total--
			l.mu.Unlock()
			if l.o.OnInFlight != nil {
				l.o.OnInFlight(-1)
			}
		})
	}, nil
}

// InFlight reports how many listings are answered now.
func (l *Listings) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

func (l *Listings) refuse(limit string, n int, what string) error {
	if l.o.OnRefused != nil {
		l.o.OnRefused(limit)
	}
	return &listingError{err: Error{Status: http.StatusTooManyRequests,
		Detail: "too many " + what + " in progress (at most " + strconv.Itoa(n) + "): read the answers, then try again"},
		limit: limit, max: n}
}

// listingError is the 429 of a listing beyond a bound of listings in flight.
type listingError struct {
	err   Error
	limit string
	max   int
}

func (e *listingError) Error() string { return e.err.Detail }

func (e *listingError) Unwrap() error { return &e.err }

func (e *listingError) Limited() (string, int, time.Duration) { return e.limit, e.max, listingRetry }
