package client

import (
	"time"
)

// defaultHeartbeat is the interval when neither the options nor the
// server say one: the spec's.
const defaultHeartbeat = 15 * time.Second

// Limits are what the server advertised in its last auth or auth.refresh
// result. A zero field was not advertised (an older server): the client
// then does not enforce it.
type Limits struct {
	Subscriptions         int           // stream subscriptions and planner watches per connection
	RequestsPerSecond     int           // requests per second per connection, in bursts of twice that
	MessageBytes          int64         // the largest message the server reads
	Replay                int           // events replayed at most; more is -32010
	ConnectionsPerSubject int           // connections of one subject on a replica
	Heartbeat             time.Duration // the server's heartbeat interval
}

// wireLimits is the auth result's "limits".
type wireLimits struct {
	Subscriptions         int   `json:"subscriptions"`
	RequestsPerSecond     int   `json:"requests_per_second"`
	MessageBytes          int64 `json:"message_bytes"`
	Replay                int   `json:"replay"`
	ConnectionsPerSubject int   `json:"connections_per_subject"`
	HeartbeatMs           int64 `json:"heartbeat_ms"`
}

func (w *wireLimits) limits() Limits {
	if w == nil {
		return Limits{}
	}
	return Limits{
		Subscriptions: max(w.Subscriptions, 0), RequestsPerSecond: max(w.RequestsPerSecond, 0),
		MessageBytes: max(w.MessageBytes, 0), Replay: max(w.Replay, 0),
		ConnectionsPerSubject: max(w.ConnectionsPerSubject, 0),
		Heartbeat:             time.Duration(max(w.HeartbeatMs, 0)) * time.Millisecond,
	}
}

// heartbeats returns how often to send $/heartbeat and the interval of
// which three silent ones end the connection, given the user's interval
// (0: not set) and the server's (0: not advertised). The server's wins
// when the user set none. With both, heartbeats go out at the shorter one
// (the server times out a client that sends less often than it expects)
// and silence is measured in the longer one (the server sends only every
// one of its intervals).
func heartbeats(user, server time.Duration) (send, silence time.Duration) {
	switch {
	case user <= 0 && server <= 0:
		return defaultHeartbeat, defaultHeartbeat
	case user <= 0:
		return server, server
	case server <= 0:
		return user, user
	}
	return min(user, server), max(user, server)
}

// Limits returns the limits the server advertised on the current (or the
// last) connection.
func (c *Client) Limits() Limits {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limits
}
