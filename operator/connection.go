// What a replica lists of one of its connections, and the outcomes of listings a replica counts.

package operator

import (
	"encoding/json"
	"time"

	"github.com/ballet/gateway/tracker"
)

// Connection is one authenticated /rpc connection of a replica, as an operator's listing
// shows it. The gateway fills it for each of its connections (Source).
type Connection struct {
	// Replica is the replica's id (presence_replicas.id, logged at start); the listing sets it.
	Replica  string `json:"replica"`
	ID       string `json:"id"` // the connection's id in the logs ("conn")
	Subject  string `json:"subject"`
	ClientID string `json:"client_id,omitempty"`
	// Codec is "json" or "msgpack".
	Codec string `json:"codec"`
	// Transport is "websocket", or "http" for a POST /rpc response held open.
	Transport   string    `json:"transport"`
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

// The outcomes of listings a replica observes (ListOptions.Observe), as the
// ballet_gateway_admin_listings_total label.
const (
	ListingAsked    = "asked"    // this replica gathered a listing
	ListingRefused  = "refused"  // it refused to gather one: BALLET_ADMIN_MAX_LISTINGS in progress
	ListingAnswered = "answered" // it answered a listing (its own or another replica's)
	ListingBusy     = "busy"     // it did not answer one: BALLET_ADMIN_MAX_LISTINGS in progress
	ListingFailed   = "failed"   // its answer could not be written in time
)

// ListingOutcomes are every outcome, in the order above.
var ListingOutcomes = []string{ListingAsked, ListingRefused, ListingAnswered, ListingBusy, ListingFailed}
