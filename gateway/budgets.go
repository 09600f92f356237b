// CPU budgets: what a client may make a replica compute, per connection
// (BALLET_REQUEST_RATE, WebSocket pings included, and every other frame
// that is not a message at a sixteenth of a request) and per subject across
// its connections on the replica (BALLET_SUBJECT_REQUEST_RATE,
// BALLET_REPLAY_RATE), so that no client takes the replica's cores while
// it stays within the other limits.

package gateway

import (
	"context"
	"time"

	"github.com/ballet/gateway/internal/admission"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// The limit labels of the budgets (see limits.go).
const (
	limitPings           = "pings"
	limitFrames          = "frames"
	limitSubjectRequests = protocol.LimitSubjectRequests
	limitReplay          = protocol.LimitReplay
)

// subjectBudget is what one subject's connections on the replica share. It
// lives while the subject has an authenticated connection here (Server.subjects).
type subjectBudget struct {
	requests admission.Limiter

	// Replays: one reads at a time (turn), so that the events each one
	// read are charged before the next is let in, and the budget is never
	// overdrawn by more than one replay.
	turn   chan struct{}
	replay admission.Replay
}

func newSubjectBudget() *subjectBudget { return &subjectBudget{turn: make(chan struct{}, 1)} }

// replayBurst is the replay budget's size: twice the rate, and at least
// one replay of BALLET_REPLAY_LIMIT events.
func (c *Config) replayBurst() float64 { return float64(max(2*c.ReplayRate, c.ReplayLimit)) }

// replayRetry reports how long until the subject may replay again: 0
// while its replay budget is not overdrawn.
func (b *subjectBudget) replayRetry(c *Config) time.Duration {
	return b.replay.Retry(float64(c.ReplayRate), c.replayBurst())
}

// chargeReplay spends n events of the replay budget.
func (b *subjectBudget) chargeReplay(c *Config, n int) {
	b.replay.Charge(float64(c.ReplayRate), c.replayBurst(), n)
}

// Admit runs on the reader before a frame is decoded (rpc.Hooks):
// a closing session reads no more messages, and an authenticated one
// spends its connection's request budget, then its subject's.
func (s *session) Admit(ctx context.Context) error {
	switch st := s.lifecycle(); {
	case st >= stateRefusing:
		return rpc.ErrSkip
	case st != stateAuthed, s.http:
		return nil // only an auth request is served (see Inline and invalid), or POST /rpc admitted it
	}
	limit, rate := limitRequests, s.srv.cfg.RequestRate
	ok, wait, retry := s.rate.Take(rate)
	if b := s.budget.Load(); ok && b != nil {
		limit, rate = limitSubjectRequests, s.srv.cfg.SubjectRequestRate
		ok, wait, retry = b.requests.Take(rate)
	}
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
	return s.srv.limitError(limit, rate, retry)
}

// Pinged runs as a WebSocket ping arrives (wsnet.Owner),
// before or after auth, on whichever goroutine reads the socket, and
// reports whether it is answered. A ping spends the connection's request
// budget: beyond it, it gets no pong; once the refusals' budget is spent
// too, the connection is closed 4029, and the reader reads no further
// (TCP holds the peer back) until the session has ended or ctx (the
// library's bound on one control frame) ends.
func (s *session) Pinged(ctx context.Context, _ []byte) bool {
	if s.conn == nil || s.closing() {
		return false // not set up yet, or a close handshake under way
	}
	ok, wait, _ := s.rate.Take(s.srv.cfg.RequestRate)
	if ok {
		return true
	}
	s.srv.metrics.LimitRejections.WithLabelValues(limitPings).Inc()
	if wait == 0 {
		return false
	}
	s.logger().Info("connection closed: WebSocket pings beyond the request budget", "max", s.srv.cfg.RequestRate)
	s.closeWith(StatusLimitExceeded, "too many pings")
	select {
	case <-s.conn.Done():
	case <-ctx.Done():
	}
	return false
}

// framesPerRequest is how many frames that are not messages (pongs, close frames, fragments
// of a message before its last) the frame budget takes for one request of
// BALLET_REQUEST_RATE: a message of the read limit in fragments of 512 bytes fits its burst.
const framesPerRequest = 16

// frameRate is the frame budget's rate per second (its burst is twice that).
func (c *Config) frameRate() int { return framesPerRequest * c.RequestRate }

// Framed runs as a WebSocket frame arrives that is neither a ping nor a
// message's last frame (wsnet.Owner), before or after auth: a pong, a
// close frame, a fragment of a message before its last. Each spends the
// connection's frame budget; beyond it the frame is read all the same
// (counted as refused), and once the refusals' budget is spent too, the
// connection is closed 4029 and the reader reads no further (TCP holds the
// peer back) until the session has ended or pingBound has passed.
func (s *session) Framed() {
	if s.conn == nil || s.closing() {
		return // not set up yet, or a close handshake under way
	}
	rate := s.srv.cfg.frameRate()
	b := s.frames.Load()
	if b == nil {
		b = new(admission.Limiter)
		if !s.frames.CompareAndSwap(nil, b) {
			b = s.frames.Load()
		}
	}
	ok, wait, _ := b.Take(rate)
	if ok {
		return
	}
	s.srv.metrics.LimitRejections.WithLabelValues(limitFrames).Inc()
	if wait == 0 {
		return
	}
	s.logger().Info("connection closed: WebSocket frames beyond the frame budget", "max", rate)
	s.closeWith(StatusLimitExceeded, "too many frames")
	t := time.NewTimer(pingBound)
	defer t.Stop()
	select {
	case <-s.conn.Done():
	case <-t.C:
	}
}

// pingBound bounds how long the reader of a connection closed for its
// frames waits for the session to end (the library's bound on a ping's).
const pingBound = 5 * time.Second

// authMessageBytes bounds the first message of a connection, which must be
// an auth request (the reader reads no other before the auth is done): its
// token fits in 64 KiB, as it must to fit a REST request's header.
const authMessageBytes = 64 << 10

// replayRefusal is -32029 for a subscribe with from_seq while the subject's
// replay budget is overdrawn; nil when it may replay (or is not counted:
// a session that ended while authenticating).
func (s *session) replayRefusal(b *subjectBudget) error {
	if b == nil {
		return nil
	}
	if d := b.replayRetry(&s.srv.cfg); d > 0 {
		return s.srv.limitError(limitReplay, s.srv.cfg.ReplayRate, d)
	}
	return nil
}

// replayGate is streams.SubscribeRequest.Replay for a subscribe with
// from_seq: it waits for the subject's turn to replay, refuses (*refused)
// while the subject's replay budget is overdrawn, and charges the events the
// replay read.
func (s *session) replayGate(b *subjectBudget, refused *error) func(ctx context.Context) (func(read int), error) {
	if b == nil {
		return nil
	}
	return func(ctx context.Context) (func(int), error) {
		select {
		case b.turn <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if *refused = s.replayRefusal(b); *refused != nil {
			<-b.turn
			return nil, *refused
		}
		return func(read int) {
			b.chargeReplay(&s.srv.cfg, read)
			<-b.turn
		}, nil
	}
}
