package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/ballet/gateway/protocol"
)

// maxRetryAfter caps a server's Retry-After, so that a misconfigured
// proxy cannot stop a client for hours.
const maxRetryAfter = 10 * time.Minute

// defaultHeartbeat is the interval when neither the options nor the
// server say one: the spec's.
const defaultHeartbeat = 15 * time.Second

// Limits are what the server advertised in its last auth or auth.refresh
// result. A zero field was not advertised (an older server, or for the
// planner's, one that does not run it): the client then does not enforce it.
type Limits struct {
	Subscriptions            int           // stream subscriptions and planner watches per connection
	RequestsPerSecond        int           // requests per second per connection, in bursts of twice that
	SubjectRequestsPerSecond int           // requests per second of the subject's connections on a replica together, in bursts of twice that
	MessageBytes             int64         // the largest message the server reads
	QueuedBytes              int64         // bytes the server queues for the connection, not yet written; beyond, it closes the connection (1013)
	Replay                   int           // events replayed at most; more is -32010
	ReplayEventsPerSecond    int           // events replayed per second for the subject on a replica
	ConnectionsPerSubject    int           // connections of one subject on a replica
	Heartbeat                time.Duration // the server's heartbeat interval
	PlannerMessageBytes      int           // the longest planner.send text, in bytes of UTF-8
	PlannerTurns             int           // planner turns of the subject running at once, on all replicas
}

// limitsOf is what an auth result's "limits" advertise.
func limitsOf(w *protocol.Limits) Limits {
	if w == nil {
		return Limits{}
	}
	return Limits{
		Subscriptions:            max(w.Subscriptions, 0),
		RequestsPerSecond:        max(w.RequestsPerSecond, 0),
		SubjectRequestsPerSecond: max(w.SubjectRequestsPerSecond, 0),
		MessageBytes:             max(w.MessageBytes, 0),
		QueuedBytes:              max(w.QueuedBytes, 0),
		Replay:                   max(w.Replay, 0),
		ReplayEventsPerSecond:    max(w.ReplayEventsPerSecond, 0),
		ConnectionsPerSubject:    max(w.ConnectionsPerSubject, 0),
		Heartbeat:                time.Duration(max(w.HeartbeatMs, 0)) * time.Millisecond,
		PlannerMessageBytes:      max(w.PlannerMessageBytes, 0),
		PlannerTurns:             max(w.PlannerTurns, 0),
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

// checkSubscriptionLimitLocked refuses one more subscription beyond the
// advertised limit. The caller holds c.mu.
func (c *Client) checkSubscriptionLimitLocked() error {
	if n := c.limits.Subscriptions; n > 0 && len(c.subs) >= n {
		return &LimitError{Limit: LimitSubscriptions, Max: n}
	}
	return nil
}

// checkPlannerMessage refuses a planner.send text longer than the
// advertised limit, as the server would (-32602).
func (c *Client) checkPlannerMessage(text string) error {
	if n := c.Limits().PlannerMessageBytes; n > 0 && len(text) > n {
		return &LimitError{Limit: LimitPlannerMessageBytes, Max: n}
	}
	return nil
}

// callRetrying sends a request; a refusal for a rate (-32029 with limit
// "requests", "subject_requests" or, for a subscribe with from_seq,
// "replay") is sent again after the server's retry_after_ms, up to retries
// times (negative: for as long as ctx and the connection last). The server
// refuses such a request before handling it, so sending it again is safe
// for every method. A wait that would outlast ctx's deadline is not begun:
// the *LimitError is returned at once.
func (cn *conn) callRetrying(ctx context.Context, retries int, method string, params, result any) error {
	for attempt := 0; ; attempt++ {
		err := cn.call1(ctx, method, params, result)
		var le *LimitError
		if !errors.As(err, &le) || !isRate(le.Limit) || (retries >= 0 && attempt >= retries) {
			return err
		}
		wait := retryWait(le.RetryAfter, attempt)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		cn.c.log.Debug("request rate limit: waiting", "method", method, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-cn.done():
			t.Stop()
			return cn.lost()
		}
	}
}

// isRate reports whether limit is a rate, whose refusals say when to
// send the request again.
func isRate(limit string) bool {
	return limit == LimitRequests || limit == LimitSubjectRequests || limit == LimitReplay
}

// retryWait is the wait before sending a request refused for the rate
// again: the server's retry_after, plus jitter growing with the attempts
// so that calls refused together do not all return together.
func retryWait(after time.Duration, attempt int) time.Duration {
	after = max(after, time.Millisecond)
	spread := after << min(attempt, 3)
	return after + rand.N(spread+1)
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// reconnectDelay is the wait before the next attempt after err (why the
// last connection ended or the last attempt failed). A subject at its
// connection limit waits near MaxBackoff, since other connections must end
// first; a handshake refused with Retry-After waits at least that.
func (c *Client) reconnectDelay(b *backoff, err error) time.Duration {
	var he *HandshakeError
	switch {
	case isSubjectLimit(err):
		d := b.ceiling()
		c.log.Warn("too many connections of this subject: backing off", "err", err, "delay", d)
		return d
	case errors.As(err, &he) && he.RetryAfter > 0:
		d := max(b.next(), he.RetryAfter+rand.N(he.RetryAfter/4+1))
		c.log.Warn("the server is busy: backing off", "status", he.StatusCode, "delay", d)
		return d
	}
	return b.next()
}
