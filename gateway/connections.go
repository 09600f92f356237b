// The replica's connections as operators list them (GET /api/v1/admin/connections): the
// server fills operator.Connection for each, and counts the listings' outcomes.

package gateway

import (
	"cmp"
	"slices"
	"time"

	"github.com/ballet/gateway/operator"
)

// Connections returns at most limit of the replica's authenticated connections, of subject
// only unless it is "", oldest first, and whether there were more. Each is read under its
// session's lock, one at a time, as CloseSubject reads them: a listing never holds up more
// than one session at once, and for no longer than a copy of a few fields.
func (s *Server) Connections(subject string, limit int) (conns []operator.Connection, truncated bool) {
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
	slices.SortFunc(conns, func(a, b operator.Connection) int {
		return cmp.Or(a.ConnectedAt.Compare(b.ConnectedAt), cmp.Compare(a.ID, b.ID))
	})
	return conns, truncated
}

// listed is the session as a Connection, when it is authenticated as subject (any subject
// when it is "") and not closing.
func (s *session) listed(subject string) (operator.Connection, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.principal
	if p == nil || subject != "" && p.Subject != subject || s.lifecycle() >= stateClosing {
		return operator.Connection{}, false
	}
	watches := s.subs.count("planner")
	return operator.Connection{
		ID: s.connID(), Subject: p.Subject, ClientID: p.ClientID, Codec: s.codecLabel(),
		Transport: s.transportLabel(), ConnectedAt: time.Unix(0, s.since).UTC(), RemoteAddr: s.remoteAddr(),
		Subscriptions: s.subs.len() - watches, Watches: watches, ExpiresAt: time.Unix(0, s.expAt).UTC(),
	}, true
}

// ListingObserver counts listings' outcomes in ballet_gateway_admin_listings_total
// (operator.ListOptions.Observe).
func (m *Metrics) ListingObserver() func(outcome string) {
	return func(outcome string) { m.AdminListings.WithLabelValues(outcome).Inc() }
}
