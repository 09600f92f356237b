package gateway

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/rpc"
)

// StatusLimitExceeded closes a connection that a limit refuses (the
// connections of one subject); numbered like HTTP's 429, as -32029 is.
const StatusLimitExceeded websocket.StatusCode = 4029

// The limit label of ballet_gateway_limit_rejections_total and the "limit"
// of -32029's data.
const (
	limitSubscriptions  = "subscriptions"
	limitRequests       = "requests"
	limitSubjectConns   = "connections_per_subject"
	limitConnections    = "connections"
	limitAddrConns      = "connections_per_ip"
	limitQueuedBytes    = "queued_bytes"
	limitRejectionsHelp = "Requests, subscriptions, connections and sockets refused by a limit, by limit."
)

// overloadRetryAfter is the Retry-After of the 503 a full replica answers:
// long enough for a load balancer to send the retry elsewhere.
const overloadRetryAfter = 5 * time.Second

// limitData is the data of a -32029 error.
type limitData struct {
	Limit        string `json:"limit"`
	Max          int    `json:"max"`
	RetryAfterMs *int64 `json:"retry_after_ms,omitempty"`
}

// limitError is -32029 for limit, whose value is max, counted.
func (s *Server) limitError(limit string, max int, retryAfter time.Duration) error {
	s.metrics.LimitRejections.WithLabelValues(limit).Inc()
	return limitExceeded(limit, max, retryAfter)
}

// limitExceeded is -32029 for limit, whose value is max.
func limitExceeded(limit string, max int, retryAfter time.Duration) error {
	d := limitData{Limit: limit, Max: max}
	msg := "limit exceeded: " + limit + " (at most " + strconv.Itoa(max) + ")"
	if retryAfter > 0 {
		ms := int64(math.Ceil(float64(retryAfter) / float64(time.Millisecond)))
		d.RetryAfterMs = &ms
		msg += ", retry after " + strconv.FormatInt(ms, 10) + " ms"
	}
	return &rpc.Error{Code: rpc.ErrLimitExceeded.Code, Message: msg, Data: d}
}

// limits is what the auth result advertises, so that clients stay within
// them without learning them by error.
type limits struct {
	Subscriptions         int   `json:"subscriptions"`
	RequestsPerSecond     int   `json:"requests_per_second"`
	MessageBytes          int64 `json:"message_bytes"`
	Replay                int   `json:"replay"`
	ConnectionsPerSubject int   `json:"connections_per_subject"`
	HeartbeatMs           int64 `json:"heartbeat_ms"`
}

func (s *Server) advertised() *limits {
	c := &s.cfg
	return &limits{
		Subscriptions: c.MaxSubscriptions, RequestsPerSecond: c.RequestRate, MessageBytes: c.ReadLimit,
		Replay: c.ReplayLimit, ConnectionsPerSubject: c.MaxConnectionsPerSubject,
		HeartbeatMs: c.HeartbeatInterval.Milliseconds(),
	}
}

// rateLimiter is one connection's request budget: a token bucket that
// fills at rate per second up to twice that. A frame beyond the budget is
// refused (-32029), and refusals have a budget of the same size: past it
// the reader waits for the next refusal's token before it reads on, so a
// flood costs the server no more than twice the rate in frames, and the
// peer is held back by TCP. Only the connection's reader uses it.
type rateLimiter struct {
	tokens, refusals float64
	last             int64 // Unix ns of the last refill; 0 before the first frame
}

// take spends a token for one frame at now. It reports whether the frame
// is within the budget; when it is not, wait is how long the reader must
// wait before refusing it, and retry how long until a token is free.
func (l *rateLimiter) take(now time.Time, rate int) (ok bool, wait, retry time.Duration) {
	r, burst := float64(rate), 2*float64(rate)
	ns := now.UnixNano()
	if l.last == 0 {
		l.tokens, l.refusals = burst, burst
	} else if dt := float64(ns-l.last) / 1e9; dt > 0 {
		l.tokens = min(burst, l.tokens+dt*r)
		l.refusals = min(burst, l.refusals+dt*r)
	}
	l.last = ns
	if l.tokens >= 1 {
		l.tokens--
		return true, 0, 0
	}
	if l.refusals < 1 {
		wait = time.Duration((1 - l.refusals) / r * 1e9)
		l.refusals = 1 // what the wait brings
		l.tokens += wait.Seconds() * r
		l.last = ns + int64(wait)
	}
	l.refusals--
	retry = time.Duration((1 - l.tokens) / r * 1e9)
	return false, wait, max(retry, time.Millisecond)
}

// admit runs on the reader before a frame is decoded (rpc.Options.Admit):
// a closing session reads no more messages, and an authenticated one
// spends its request budget.
func (s *session) admit(ctx context.Context) error {
	if s.closing.Load() {
		return rpc.ErrSkip
	}
	if !s.authed.Load() {
		return nil // only an auth request is served: see inline and invalid
	}
	rate := s.srv.cfg.RequestRate
	ok, wait, retry := s.rate.take(time.Now(), rate)
	if ok {
		return nil
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return rpc.ErrSkip
		}
	}
	return s.srv.limitError(limitRequests, rate, retry)
}

// screen sees each message as decoded (rpc.Options.Screen). Before auth,
// only a request goes on (an auth request, or another that is answered
// -32001 and closes the connection); anything else closes the connection
// at once.
func (s *session) screen(m *codec.Message, err *codec.DecodeError) bool {
	if s.authed.Load() || (err == nil && m.IsRequest()) {
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
	if s.conns.Add(1) <= int64(s.cfg.MaxConnections) {
		return true
	}
	s.conns.Add(-1)
	s.metrics.LimitRejections.WithLabelValues(limitConnections).Inc()
	w.Header().Set("Retry-After", strconv.Itoa(int(overloadRetryAfter/time.Second)))
	http.Error(w, "the gateway is at its connection limit; try again later", http.StatusServiceUnavailable)
	return false
}

func (s *Server) releaseConn() { s.conns.Add(-1) }

// acquireSubject counts an authenticated connection of subject against
// BALLET_MAX_CONNECTIONS_PER_SUBJECT.
func (s *Server) acquireSubject(subject string) bool {
	s.subjMu.Lock()
	defer s.subjMu.Unlock()
	if s.subjects[subject] >= s.cfg.MaxConnectionsPerSubject {
		return false
	}
	if s.subjects == nil {
		s.subjects = make(map[string]int)
	}
	s.subjects[subject]++
	return true
}

func (s *Server) releaseSubject(subject string) {
	s.subjMu.Lock()
	defer s.subjMu.Unlock()
	if s.subjects[subject] <= 1 {
		delete(s.subjects, subject)
	} else {
		s.subjects[subject]--
	}
}
