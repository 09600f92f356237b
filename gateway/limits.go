package gateway

import (
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/edge"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// StatusLimitExceeded closes a connection that a limit refuses (the
// connections of one subject); numbered like HTTP's 429, as -32029 is.
const StatusLimitExceeded websocket.StatusCode = protocol.CloseLimitExceeded

// The limit label of ballet_gateway_limit_rejections_total and the "limit"
// of -32029's data.
const (
	limitSubscriptions = protocol.LimitSubscriptions
	limitRequests      = protocol.LimitRequests
	limitSubjectConns  = protocol.LimitConnectionsPerSubject
	limitConnections   = edge.LimitConnections
	limitAddrConns     = edge.LimitAddrConns
	limitAddrRate      = "unauthenticated_requests_per_ip" // BALLET_ADDR_RATE (addrrate.go)
	limitQueuedBytes   = "queued_bytes"
	// A connection closed as one of the replica's most behind (BALLET_REPLICA_QUEUE_BYTES).
	limitReplicaQueuedBytes = "replica_queued_bytes"
	// A connection closed 1013 as the replica's messages not yet whole had no room for its next
	// piece (BALLET_PARTIAL_MESSAGE_BYTES).
	limitPartialBytes = "partial_message_bytes"
	// A socket refused 503 as the replica had BALLET_MAX_PENDING_SOCKETS sockets not yet a
	// session nor idle.
	limitPendingSockets = edge.LimitPendingSockets
	limitRejectionsHelp = "Requests, pings, frames, replays, subscriptions, connections and sockets refused by a limit, by limit."
)

// limitLabels are the values of the limit label, each exported at zero from the start: the
// gateway's, and REST's per-subject rate (httpapi.LimitRequests, counted through
// RESTRejected) and listings in flight (counted through RESTListingRejected). The planner's
// are added with its observer (PlannerObserver).
var limitLabels = []string{limitSubscriptions, limitRequests, limitSubjectConns, limitConnections, limitAddrConns,
	limitAddrRate, limitQueuedBytes, limitReplicaQueuedBytes, limitPartialBytes, limitPendingSockets, limitPings, limitFrames, limitSubjectRequests, limitReplay, httpapi.LimitRequests,
	httpapi.LimitListings, httpapi.LimitReplicaListings}

// Config.PartialMessageBytes' default: the Go memory limit over PartialMessageDivisor, or
// DefaultPartialMessageBytes without one.
const (
	DefaultPartialMessageBytes = 256 << 20
	PartialMessageDivisor      = 8
)

// partialMessageBytes is the replica's budget for WebSocket messages not yet whole: the
// setting, or an eighth of the Go memory limit (GOMEMLIMIT, which serve sets from the
// container's limit), or 256 MiB without one; never less than one connection's worst (twice
// the read limit, and a piece of 64 KiB), so that a client alone on the replica always gets
// its largest message through.
func partialMessageBytes(setting, readLimit int64) int64 {
	b := setting
	if b <= 0 {
		b = DefaultPartialMessageBytes
		if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
			b = lim / PartialMessageDivisor
		}
	}
	return max(b, 2*readLimit+64<<10)
}

// webSocketOptions are o (nil: the defaults) with the replica's budget for messages not yet
// whole, its refusals counted.
func (s *Server) webSocketOptions(o *wsnet.Options) *wsnet.Options {
	var w wsnet.Options
	if o != nil {
		w = *o
	}
	w.PartialMessageBytes = partialMessageBytes(s.cfg.PartialMessageBytes, s.cfg.ReadLimit)
	w.PartialRefused = func() { s.metrics.LimitRejections.WithLabelValues(limitPartialBytes).Inc() }
	return &w
}

// PartialBytes is what the replica's /rpc connections hold for messages not yet whole,
// counted against PartialBytesBudget.
func (s *Server) PartialBytes() int64 { return s.upgrader.PartialBytes() }

// PartialBytesBudget is BALLET_PARTIAL_MESSAGE_BYTES as the server applies it.
func (s *Server) PartialBytesBudget() int64 { return s.upgrader.PartialBudget() }

// overloadRetryAfter is the Retry-After of the 503 a full replica answers:
// long enough for a load balancer to send the retry elsewhere.
const overloadRetryAfter = edge.RetryAfter

// limitError is -32029 for limit, whose value is max, counted.
func (s *Server) limitError(limit string, max int, retryAfter time.Duration) error {
	s.metrics.LimitRejections.WithLabelValues(limit).Inc()
	return limitExceeded(limit, max, retryAfter)
}

// limitExceeded is -32029 for limit, whose value is max.
func limitExceeded(limit string, max int, retryAfter time.Duration) error {
	d := protocol.LimitData{Limit: limit, Max: max}
	msg := "limit exceeded: " + limit + " (at most " + strconv.Itoa(max) + ")"
	if retryAfter > 0 {
		ms := int64(math.Ceil(float64(retryAfter) / float64(time.Millisecond)))
		d.RetryAfterMs = &ms
		msg += ", retry after " + strconv.FormatInt(ms, 10) + " ms"
	}
	return &rpc.Error{Code: int(protocol.ErrLimitExceeded), Message: msg, Data: d}
}

// advertised is the limits the auth result tells.
func (s *Server) advertised() *protocol.Limits {
	c := &s.cfg
	l := &protocol.Limits{
		Subscriptions: c.MaxSubscriptions, RequestsPerSecond: c.RequestRate, SubjectRequestsPerSecond: c.SubjectRequestRate,
		MessageBytes: c.ReadLimit, QueuedBytes: int64(c.ConnectionQueueBytes), Replay: c.ReplayLimit, ReplayEventsPerSecond: c.ReplayRate,
		ConnectionsPerSubject: c.MaxConnectionsPerSubject, HeartbeatMs: c.HeartbeatInterval.Milliseconds(),
	}
	if s.planner != nil {
		p := s.planner.Limits()
		l.PlannerMessageBytes, l.PlannerTurns = p.MessageBytes, p.TurnsPerSubject
	}
	return l
}

// Screen sees each message as decoded (rpc.Hooks). Before auth,
// only a request goes on (an auth request, or another that is answered
// -32001 and closes the connection); anything else closes the connection
// at once.
func (s *session) Screen(m *codec.Message, err *codec.DecodeError) bool {
	if s.authed() || (err == nil && m.IsRequest()) {
		return true
	}
	s.srv.metrics.AuthFailures.WithLabelValues("no_auth").Inc()
	s.closeWith(StatusUnauthenticated, "the first message must be an auth request")
	return false
}

// acquireConn counts a connection being opened against
// BALLET_MAX_CONNECTIONS; false when the replica is full and the client
// was answered 503.
func (s *Server) acquireConn(w http.ResponseWriter) bool {
	if s.conns.Acquire() {
		return true
	}
	s.metrics.LimitRejections.WithLabelValues(limitConnections).Inc()
	w.Header().Set("Retry-After", strconv.Itoa(int(overloadRetryAfter/time.Second)))
	http.Error(w, "the gateway is at its connection limit; try again later", http.StatusServiceUnavailable)
	return false
}

func (s *Server) releaseConn() { s.conns.Release() }
