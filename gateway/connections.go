// The replica's connections as operators list them (GET /api/v1/admin/connections).

package gateway

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ballet/gateway/tracker"
)

// Connection is one authenticated /rpc connection of a replica, as an operator's listing
// shows it.
type Connection struct {
	// Replica is the replica's id (presence_replicas.id, logged at start); the listing sets it.
	Replica  string `json:"replica"`
	ID       string `json:"id"` // the connection's id in the logs ("conn")
	Subject  string `json:"subject"`
	ClientID string `json:"client_id,omitempty"`
	// Codec is "json" or "msgpack".
	Codec       string    `json:"codec"`
	ConnectedAt time.Time `json:"connected_at"`
	RemoteAddr  string    `json:"remote_addr"`
	// Subscriptions counts the stream subscriptions, Watches the planner watches.
	Subscriptions int       `json:"subscriptions"`
	Watches       int       `json:"watches"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// MarshalJSON writes the times as the REST API does (tracker.TimeFormat).
func (c Connection) MarshalJSON() ([]byte, error) {
	type plain Connection
	return json.Marshal(struct {
		plain
		ConnectedAt string `json:"connected_at"`
		ExpiresAt   string `json:"expires_at"`
	}{plain(c), tracker.FormatTime(c.ConnectedAt), tracker.FormatTime(c.ExpiresAt)})
}

// Connections returns at most limit of the replica's authenticated connections, of subject
// only unless it is "", oldest first, and whether there were more. Each is read under its
// session's lock, one at a time, as CloseSubject reads them: a listing never holds up more
// than one session at once, and for no longer than a copy of a few fields.
func (s *Server) Connections(subject string, limit int) (conns []Connection, truncated bool) {
	for _, sess := range s.openSessions() {
		c, ok := sess.listed(subject)
		if !ok {
			continue
		}
		if len(conns) == limit {
			truncated = true
			break
		}
		conns = append(conns, c)
	}
	slices.SortFunc(conns, func(a, b Connection) int {
		return cmp.Or(a.ConnectedAt.Compare(b.ConnectedAt), cmp.Compare(a.ID, b.ID))
	})
	return conns, truncated
}

// listed is the session as a Connection, when it is authenticated as subject (any subject
// when it is "") and not closing.
func (s *session) listed(subject string) (Connection, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.principal
	if p == nil || subject != "" && p.Subject != subject || s.lifecycle() >= stateClosing {
		return Connection{}, false
	}
	watches := s.subs.count("planner")
	return Connection{
		ID: s.connID(), Subject: p.Subject, ClientID: p.ClientID, Codec: s.codecLabel(),
		ConnectedAt: time.Unix(0, s.since).UTC(), RemoteAddr: s.remoteAddr(),
		Subscriptions: s.subs.len() - watches, Watches: watches, ExpiresAt: time.Unix(0, s.expAt).UTC(),
	}, true
}

// ServerRef is a Server to be, for what is built before it (the operators' API): until Store
// sets it, it lists no connection.
type ServerRef struct{ atomic.Pointer[Server] }

// Connections is the server's, or none before it is set.
func (r *ServerRef) Connections(subject string, limit int) ([]Connection, bool) {
	if s := r.Load(); s != nil {
		return s.Connections(subject, limit)
	}
	return nil, false
}

// The outcomes of operators' connection listings, as the ballet_gateway_admin_listings_total
// label.
const (
	ListingAsked    = "asked"    // this replica gathered a listing
	ListingRefused  = "refused"  // it refused to gather one: BALLET_ADMIN_MAX_LISTINGS in progress
	ListingAnswered = "answered" // it answered a listing (its own or another replica's)
	ListingBusy     = "busy"     // it did not answer one: BALLET_ADMIN_MAX_LISTINGS in progress
	ListingFailed   = "failed"   // its answer could not be written in time
)

var listingLabels = []string{ListingAsked, ListingRefused, ListingAnswered, ListingBusy, ListingFailed}

// ListingObserver counts listings' outcomes in ballet_gateway_admin_listings_total
// (operator.ListOptions.Observe).
func (m *Metrics) ListingObserver() func(outcome string) {
	return func(outcome string) { m.AdminListings.WithLabelValues(outcome).Inc() }
}
