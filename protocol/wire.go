package protocol

// Close codes of the realtime API beyond RFC 6455's.
const (
	CloseHeartbeatTimeout = 4000 // three heartbeat intervals passed without a frame from the client
	CloseUnauthenticated  = 4001 // no auth request in time, a rejected token, or the token expired
	CloseLimitExceeded    = 4029 // the subject has as many connections as the server allows
)

// HeaderHeartbeatMs is the header of a response of POST /rpc (the HTTP transport) that carries
// the server's heartbeat interval in milliseconds, as limits' heartbeat_ms does on a WebSocket:
// there is no auth result over HTTP. Its open responses are silent for no longer.
const HeaderHeartbeatMs = "Ballet-Heartbeat-Ms"

// CloseCodes returns the API's own close codes.
func CloseCodes() []int {
	return []int{CloseHeartbeatTimeout, CloseUnauthenticated, CloseLimitExceeded}
}

// Limits is the auth and auth.refresh result's "limits": what the server allows, so that a
// client stays within it without learning it by error. The planner's are sent only by a server
// that runs the planner; a client treats a missing or zero field as not advertised.
type Limits struct {
	Subscriptions            int   `json:"subscriptions"`                   // stream subscriptions and planner watches per connection
	RequestsPerSecond        int   `json:"requests_per_second"`             // per connection, in bursts of twice that
	SubjectRequestsPerSecond int   `json:"subject_requests_per_second"`     // of the subject's connections on a replica together
	MessageBytes             int64 `json:"message_bytes"`                   // the largest message the server reads
	QueuedBytes              int64 `json:"queued_bytes"`                    // queued for the connection, unwritten; beyond, it is closed 1013
	Replay                   int   `json:"replay"`                          // events replayed at most; more is -32010
	ReplayEventsPerSecond    int   `json:"replay_events_per_second"`        // events replayed per second for the subject on a replica
	ConnectionsPerSubject    int   `json:"connections_per_subject"`         // connections of one subject on a replica
	HeartbeatMs              int64 `json:"heartbeat_ms"`                    // the server's heartbeat interval
	PlannerMessageBytes      int   `json:"planner_message_bytes,omitempty"` // the longest planner.send text, in bytes
	PlannerTurns             int   `json:"planner_turns,omitempty"`         // the subject's turns running at once, on all replicas
}
