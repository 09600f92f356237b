// Listing the connections of every replica (GET /api/v1/admin/connections): the bounds, the
// document, and the listing of a lone replica (a memory store).

package operator

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/ballet/gateway/internal/fault"
)

// The bounds of a listing.
const (
	// DefaultListLimit and MaxListLimit are the default and the largest limit: the most
	// connections a listing shows, and each replica answers with.
	DefaultListLimit = 1000
	MaxListLimit     = 10000
	// MaxListBytes bounds each replica's answer, and the listing, in encoded JSON: past it,
	// connections are left out as past the limit.
	MaxListBytes = 4 << 20
	// ListWait is how long a listing waits for the replicas' answers.
	ListWait = 2 * time.Second
	// DefaultMaxListings is ListOptions.MaxListings' default.
	DefaultMaxListings = 4
)

// Source is a replica's own connections (the gateway fills it: gateway.Server.Connections).
type Source interface {
	Connections(subject string, limit int) ([]Connection, bool)
}

// ReplicaAnswer says whether a live replica answered a listing in time.
type ReplicaAnswer struct {
	Replica  string `json:"replica"`
	Answered bool   `json:"answered"`
}

// Listing is the answer of GET /api/v1/admin/connections.
type Listing struct {
	Replicas    []ReplicaAnswer `json:"replicas"`
	Connections []Connection    `json:"connections"`
	// Truncated says that connections were left out: past the limit or MaxListBytes.
	Truncated bool `json:"truncated"`
}

// Lister gathers a Listing of the connections of subject ("" for all), at most limit.
type Lister interface {
	List(ctx context.Context, subject string, limit int) (*Listing, error)
}

// ListOptions bound the listings of one replica. A nil *ListOptions means defaults.
type ListOptions struct {
	// MaxListings bounds the listings the replica gathers at once, and those it answers at
	// once (BALLET_ADMIN_MAX_LISTINGS): one more to gather is refused with 429, one more to
	// answer is not answered. Default DefaultMaxListings.
	MaxListings int
	// Observe, when set, counts each listing's outcome (Listing*).
	Observe func(outcome string)
}

// WithDefaults returns o with its zero fields set to their defaults.
func (o ListOptions) WithDefaults() ListOptions {
	o.MaxListings = cmp.Or(o.MaxListings, DefaultMaxListings)
	if o.Observe == nil {
		o.Observe = func(string) {}
	}
	return o
}

// Gate bounds the listings in progress.
type Gate chan struct{}

// NewGate admits n at once.
func NewGate(n int) Gate { return make(Gate, n) }

// Enter admits one more, unless n are in; Leave when it is done.
func (g Gate) Enter() bool {
	select {
	case g <- struct{}{}:
		return true
	default:
		return false
	}
}

// Leave ends what Enter admitted.
func (g Gate) Leave() { <-g }

// ErrBusy is what a Lister refuses with while MaxListings are in progress (Busy).
var ErrBusy = fault.New(fault.Limit, "operator: listings busy")

// Busy returns the refusal of a listing while max listings are in progress: it matches
// ErrBusy, and its 429 problem names the limit, "listings", and a retry once the listings in
// progress ended.
func Busy(max int) error {
	return &fault.Error{Kind: fault.Limit, Err: ErrBusy, Limit: "listings", Max: max, RetryAfter: ListWait,
		Detail: "too many connection listings in progress (BALLET_ADMIN_MAX_LISTINGS): try again in a few seconds"}
}

// Fit returns the first of conns (ordered by Order) that fit limit and MaxListBytes in
// encoded JSON, and whether some did not.
func Fit(conns []Connection, limit int) ([]Connection, bool) {
	Order(conns)
	size := 0
	for i, c := range conns {
		b, err := json.Marshal(c)
		if err == nil {
			size += len(b) + 1
		}
		if i == limit || err != nil || size > MaxListBytes {
			return conns[:i], true
		}
	}
	return conns, false
}

// Order sorts connections by subject, then replica, then age.
func Order(conns []Connection) {
	slices.SortFunc(conns, func(a, b Connection) int {
		return cmp.Or(cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Replica, b.Replica),
			a.ConnectedAt.Compare(b.ConnectedAt), cmp.Compare(a.ID, b.ID))
	})
}

// Answer is a replica's answer: at most limit of its connections of subject, fit to
// MaxListBytes, each naming replica, and whether some were left out.
func Answer(src Source, replica, subject string, limit int) ([]Connection, bool) {
	conns, more := src.Connections(subject, limit)
	for i := range conns {
		conns[i].Replica = replica
	}
	conns, cut := Fit(conns, limit)
	return conns, more || cut
}

// Local lists the connections of a lone replica: a memory store, which no other replica
// shares.
type Local struct {
	replica string
	src     Source
	o       ListOptions
	gate    Gate
}

// NewLocal lists src, the connections of replica.
func NewLocal(replica string, src Source, o *ListOptions) *Local {
	var opts ListOptions
	if o != nil {
		opts = *o
	}
	opts = opts.WithDefaults()
	return &Local{replica: replica, src: src, o: opts, gate: NewGate(opts.MaxListings)}
}

// List answers at once.
func (l *Local) List(_ context.Context, subject string, limit int) (*Listing, error) {
	if !l.gate.Enter() {
		l.o.Observe(ListingRefused)
		return nil, Busy(l.o.MaxListings)
	}
	defer l.gate.Leave()
	conns, truncated := Answer(l.src, l.replica, subject, limit)
	l.o.Observe(ListingAsked)
	l.o.Observe(ListingAnswered)
	return &Listing{Replicas: []ReplicaAnswer{{Replica: l.replica, Answered: true}}, Connections: nonNil(conns), Truncated: truncated}, nil
}

// nonNil is conns, empty rather than nil (a JSON array, not null).
func nonNil(conns []Connection) []Connection {
	if conns == nil {
		return []Connection{}
	}
	return conns
}
