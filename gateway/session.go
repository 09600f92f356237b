package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/internal/timerheap"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/internal/admission"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// Close codes of the realtime API beyond RFC 6455's.
const (
	StatusHeartbeatTimeout websocket.StatusCode = protocol.CloseHeartbeatTimeout
	StatusUnauthenticated  websocket.StatusCode = protocol.CloseUnauthenticated
)

// session is one /rpc connection: authentication, heartbeats,
// subscriptions, and method routing.
type session struct {
	// Set by init, before start, and read-only after.
	srv   *Server
	conn  *rpc.Conn // its Codec is the session's
	t     *wsnet.Transport
	id    uint64        // random: connID
	trace *upgradeTrace // nil when the upgrade has no trace
	since int64         // when the connection was upgraded, Unix ns (Connections)
	slot  int           // in srv.sessions, under srv.mu

	lastRecv atomic.Int64 // Unix ns of the last frame from the peer
	// state is the session's lifecycle: written only by advance, under mu, and atomic so that
	// the reader's checks of every frame (Admit, Inline, Screen) take no lock.
	state   atomic.Uint32
	counted bool              // (mu) the principal's subject is counted against BALLET_MAX_CONNECTIONS_PER_SUBJECT
	http    bool              // a POST /rpc's session (httprpc.go), authenticated before it starts; set before init
	rate    admission.Limiter // BALLET_REQUEST_RATE, WebSocket pings included (budgets.go); its own lock
	// frames is the budget of the other frames that are not messages, at frameRate
	// (budgets.go), made with the first such frame: most clients send none.
	frames atomic.Pointer[admission.Limiter]

	budget atomic.Pointer[subjectBudget] // the subject's budgets, once counted (budgets.go)

	// mu guards the fields below (but hb) and counted.
	mu        sync.Mutex
	principal *auth.Principal // nil until auth succeeds
	subs      subTable

	// Timers instead of a goroutine per session: an idle connection costs
	// only its reader.
	closeCode websocket.StatusCode // final from stateClosing on
	closeMsg  string
	authTimer *time.Timer
	hb        timerheap.Timer // guarded by srv.timers' lock, which Schedule and Remove take (under mu)
	expAt     int64           // the token's expiry, Unix ns; zero until authenticated
	lastSent  int64           // last heartbeat sent, Unix ns
	addr      netip.Addr      // the address counted against BALLET_MAX_CONNECTIONS_PER_IP until auth
	// fwd is the client's address when the socket's peer is a trusted proxy
	// (BALLET_TRUSTED_PROXIES), nil otherwise: most sessions pay 8 bytes for it.
	fwd *netip.Addr

	pout atomic.Pointer[plannerOut] // planner.output frames on their way (plannerout.go), from the first watch
	// answered is set, on a POST /rpc's session, once its request is answered: it ends when it
	// holds no subscription after that (endIfDone).
	answered atomic.Bool
}

// upgradeTrace is the trace of a session's upgrade, kept apart (most sessions have none).
type upgradeTrace struct {
	id string // the trace id of the upgrade's span, else of its W3C traceparent
	// span is the upgrade's span, invalid without tracing: auth requests are its children,
	// and the other requests without trace context of their own link to it.
	span trace.SpanContext
}

// clientSub is one entry of the connection's subscription-id namespace.
type clientSub struct {
	stream *streams.Subscription // nil for planner watches, and while subscribing
	kind   string                // metrics label: project, item, planner
	cancel func()                // ends a planner watch, or a subscription's presence
	closed string                // why the hub closed it while subscribing; subscribe tells
}

// init sets up s, made with its server before the upgrade (which binds its ping hook).
func (s *session) init(t *wsnet.Transport, c codec.Codec, r *http.Request, addr netip.Addr) {
	srv := s.srv
	s.t, s.id, s.addr, s.since = t, newConnID(), addr, time.Now().UnixNano()
	if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && srv.trustedProxy(peer.Addr().Unmap()) {
		if a := srv.clientAddr(r); a.IsValid() && a != peer.Addr().Unmap() {
			s.fwd = &a
		}
	}
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		s.trace = &upgradeTrace{id: sc.TraceID().String(), span: sc}
	} else if id := traceID(r.Header.Get("traceparent")); id != "" {
		s.trace = &upgradeTrace{id: id}
	}
	t.Attach(s, c.Binary(), srv.cfg.ReadLimit)
	if !s.http {
		t.LimitFirst(authMessageBytes) // the auth request (budgets.go)
	}
	s.conn = rpc.NewConn(t, c, &rpc.Options{
		Handler:        s,
		Hooks:          s,
		Workers:        srv.workers,
		MaxQueuedBytes: int64(srv.cfg.ConnectionQueueBytes),
		Total:          srv.queued,
		Logger:         srv.logger,
	})
}

func (s *session) start() {
	s.srv.metrics.Connections.WithLabelValues(s.codecLabel(), s.transportLabel()).Inc()
	s.srv.metrics.Connects.WithLabelValues(s.codecLabel(), s.transportLabel()).Inc()
	now := time.Now()
	s.lastRecv.Store(now.UnixNano())
	s.mu.Lock()
	s.lastSent = now.UnixNano()
	if s.http && s.lifecycle() == stateMade {
		// Authenticated by its Authorization header: authed before the reader reads its
		// request, which Screen would otherwise take, a notification, for one before auth.
		s.advance(stateStarted)
		s.advance(stateAuthed)
	}
	// Not derived from a server context: the server ends its sessions one
	// by one (abort), and a context with no parent to watch costs nothing
	// per connection. Started under mu, so that what the reader serves
	// (an auth) finds the session started.
	s.conn.Start(context.Background())
	if s.srv.ctx.Err() != nil {
		s.conn.Abort(ErrServerClosed) // Shutdown gave up waiting meanwhile
	}
	closing := s.lifecycle() == stateClosing
	if !closing && s.http {
		s.rescheduleLocked(time.Now())
	} else if !closing {
		s.advance(stateStarted)
		s.authTimer = time.AfterFunc(s.srv.cfg.AuthTimeout, func() {
			if s.getPrincipal() == nil {
				s.srv.metrics.AuthFailures.WithLabelValues("timeout").Inc()
				s.closeWith(StatusUnauthenticated, "no auth request in time")
			}
		})
		s.rescheduleLocked(time.Now())
	}
	s.mu.Unlock()
	s.logger().Debug("connection opened")
	if closing {
		go s.finish() // closed (by Shutdown, or the connection ended) while starting
	}
}

// closeWith closes the session: with a WebSocket close code chosen by the
// server, or 0 when the connection already ended. The first call wins; it
// never blocks. Before start has run, start finishes the session.
func (s *session) closeWith(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	from := s.lifecycle()
	if from >= stateClosing {
		s.mu.Unlock()
		return
	}
	s.advance(stateClosing)
	s.closeCode, s.closeMsg = code, reason
	s.mu.Unlock()
	if from != stateMade {
		go s.finish()
	}
}

// refuse makes the reader read no further while the answer to the message it served goes
// out; closeWith follows (after the reply).
func (s *session) refuse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lifecycle() < stateClosing {
		s.advance(stateRefusing)
	}
}

// closing reports whether the reader reads no further: the session refuses or closes.
func (s *session) closing() bool { return s.lifecycle() >= stateRefusing }

// authed reports whether the principal is set: without a lock while the session runs.
func (s *session) authed() bool {
	switch st := s.lifecycle(); {
	case st == stateAuthed:
		return true
	case st < stateAuthed:
		return false
	}
	return s.getPrincipal() != nil // closing: it may have authenticated first
}

// Inline: before auth, a message is served before the next one is read, and anything but an
// auth request closes the connection at once (rpc.Hooks).
func (s *session) Inline(method string) bool { return method == protocol.Auth || !s.authed() }

// OnMessage notes when the peer last sent a frame, for heartbeats (rpc.Hooks).
func (s *session) OnMessage() { s.lastRecv.Store(time.Now().UnixNano()) }

// OnDone: when the peer closes or the transport fails, finish without a code (rpc.Hooks).
func (s *session) OnDone(error) { s.closeWith(0, "") }

// OnOverflow closes a connection whose client fell BALLET_CONNECTION_QUEUE_BYTES behind
// (rpc.Hooks).
func (s *session) OnOverflow() {
	s.srv.metrics.LimitRejections.WithLabelValues(limitQueuedBytes).Inc()
	s.logger().Info("connection closed: the client does not keep up", "queued_bytes_max", s.srv.cfg.ConnectionQueueBytes)
	s.conn.Shed()
	s.closeWith(websocket.StatusTryAgainLater, "too far behind: "+strconv.Itoa(s.srv.cfg.ConnectionQueueBytes)+" bytes queued")
}

// CloseWith closes the session with the code its transport chose (wsnet.Owner).
func (s *session) CloseWith(code websocket.StatusCode, reason string) { s.closeWith(code, reason) }

// CloseCode is the close code and reason closeWith chose, 0 when none was (wsnet.Owner).
func (s *session) CloseCode() (websocket.StatusCode, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeCode, s.closeMsg
}

// HeartbeatTimer is the session's place in the server's heartbeat timers (timerheap.Beater).
func (s *session) HeartbeatTimer() *timerheap.Timer { return &s.hb }

// Heartbeat runs from the server's heartbeat timers: it closes a connection whose
// token expired (4001) or that went silent (4000), or sends $/heartbeat,
// then sleeps until the next of the three is due.
func (s *session) Heartbeat() {
	interval := s.srv.cfg.HeartbeatInterval
	now := time.Now()
	s.mu.Lock()
	expAt := s.expAt
	send := now.Sub(time.Unix(0, s.lastSent)) >= interval
	if send {
		s.lastSent = now.UnixNano()
	}
	s.mu.Unlock()
	if expAt != 0 && now.UnixNano() >= expAt {
		s.srv.metrics.AuthFailures.WithLabelValues("expired").Inc()
		s.closeWith(StatusUnauthenticated, "token expired")
		return
	}
	if !s.http && now.Sub(time.Unix(0, s.lastRecv.Load())) >= 3*interval { // an HTTP client sends nothing
		s.closeWith(StatusHeartbeatTimeout, "heartbeat timeout")
		return
	}
	if send {
		s.sendHeartbeat()
	}
	s.mu.Lock()
	s.rescheduleLocked(time.Now())
	s.mu.Unlock()
}

// rescheduleLocked schedules the next heartbeat, silence check or
// token expiry. Both the timer and a refresh call it, under s.mu, so the
// later call sees the latest expiry.
func (s *session) rescheduleLocked(now time.Time) {
	if st := s.lifecycle(); st < stateStarted || st >= stateClosing {
		return // not ticking yet, or finish is about to stop it
	}
	interval := s.srv.cfg.HeartbeatInterval
	next := time.Unix(0, s.lastSent).Add(interval).Sub(now)
	if !s.http {
		next = min(next, time.Unix(0, s.lastRecv.Load()).Add(3*interval).Sub(now))
	}
	if s.expAt != 0 {
		next = min(next, time.Unix(0, s.expAt).Sub(now))
	}
	s.srv.timers.Schedule(s, now.Add(max(next, time.Millisecond)).UnixNano())
}

func (s *session) sendHeartbeat() {
	frame, err := s.notification(protocol.Heartbeat, protocol.HeartbeatParams{Time: s.srv.now().UnixMilli()})
	if err == nil && s.conn.TrySend(frame, nil) {
		s.srv.metrics.MessagesOut.WithLabelValues(protocol.Heartbeat).Inc()
	}
}

func (s *session) notification(method string, params any) ([]byte, error) {
	raw, err := s.conn.Codec().Marshal(params)
	if err != nil {
		return nil, err
	}
	return s.conn.Codec().Encode(nil, &codec.Message{Method: method, Params: raw})
}

// finish closes the WebSocket (after flushing what is queued when the
// server chose to close) and releases everything the session holds.
func (s *session) finish() {
	defer s.srv.untrack(s)
	s.mu.Lock()
	code, reason := s.closeCode, s.closeMsg
	s.advance(stateFinishing)
	if s.authTimer != nil {
		s.authTimer.Stop()
	}
	s.srv.timers.Remove(s)
	var counted string
	if s.counted {
		counted, s.counted = s.principal.Subject, false
	}
	s.mu.Unlock()
	if counted != "" {
		s.srv.subjects.Release(counted, s)
	}
	s.releaseAddr()
	s.t.BeginClose()
	if code != 0 {
		// The flush and the close handshake, bounded whatever the peer does.
		s.t.CloseWithin(time.Second + wsnet.CloseGrace)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.conn.Flush(ctx)
		cancel()
		_ = s.t.CloseHandshake(code, reason)
	} else {
		// The peer closed, or the transport failed.
		code = wsnet.Status(s.conn.Err())
		_ = s.t.CloseNow()
	}
	_ = s.conn.Close()
	s.mu.Lock()
	s.advance(stateClosed)
	subs := s.subs.all()
	s.mu.Unlock()
	for _, e := range subs {
		s.forget(e.id, e.cs)
	}
	s.srv.metrics.Connections.WithLabelValues(s.codecLabel(), s.transportLabel()).Dec()
	s.srv.metrics.Closes.WithLabelValues(codeLabel(int(code)), s.transportLabel()).Inc()
	s.logger().Debug("connection closed", "code", int(code), "reason", reason)
}

// forget removes id from the namespace if it still maps to cs, and ends
// what cs holds; it reports whether it did.
func (s *session) forget(id string, cs *clientSub) bool {
	s.mu.Lock()
	if cur, _ := s.subs.get(id); cur != cs {
		s.mu.Unlock()
		return false
	}
	s.subs.del(id)
	sub := cs.stream
	s.mu.Unlock()
	if sub != nil {
		s.srv.hub.Unsubscribe(sub)
	}
	if cs.cancel != nil {
		cs.cancel()
	}
	s.srv.metrics.Subscriptions.WithLabelValues(cs.kind).Dec()
	return true
}

// releaseAddr gives back the session's place under BALLET_MAX_CONNECTIONS_PER_IP, once: as
// it authenticates, or as it ends.
func (s *session) releaseAddr() {
	s.mu.Lock()
	addr := s.addr
	s.addr = netip.Addr{}
	s.mu.Unlock()
	if addr.IsValid() {
		s.srv.releaseAddr(addr)
	}
}

func (s *session) getPrincipal() *auth.Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.principal
}

// abort ends the session now: the rpc connection ends and the socket is
// closed under whatever the WebSocket library is doing (a close handshake
// waits for the peer).
func (s *session) abort() {
	s.conn.Abort(ErrServerClosed)
	s.t.Abort()
}

// codecLabel is the codec's metrics label.
func (s *session) codecLabel() string {
	if s.conn.Codec().Binary() {
		return "msgpack"
	}
	return "json"
}

// transportLabel is the transport's metrics label.
func (s *session) transportLabel() string {
	if s.http {
		return transportHTTP
	}
	return transportWebSocket
}

// connID is the connection's id in logs and presence: 16 hex digits.
func (s *session) connID() string { return fmt.Sprintf("%016x", s.id) }

// remoteAddr is the client's address: behind a trusted proxy the one its X-Forwarded-For gave
// (without a port), else the socket's peer (read from the socket rather than kept).
func (s *session) remoteAddr() string {
	if s.fwd != nil {
		return s.fwd.String()
	}
	if a := s.t.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

// logger returns a logger with the connection's attributes. It is built on use
// (logging is rare) rather than kept: an idle connection should not hold one.
func (s *session) logger() *slog.Logger {
	attrs := make([]any, 0, 10)
	attrs = append(attrs, "conn", s.connID(), "codec", s.codecLabel(), "transport", s.transportLabel(), "remote", s.remoteAddr())
	if s.trace != nil {
		attrs = append(attrs, "trace_id", s.trace.id)
	}
	if p := s.getPrincipal(); p != nil {
		attrs = append(attrs, "subject", p.Subject)
	}
	return s.srv.logger.With(attrs...)
}
