package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// Close codes of the realtime API beyond RFC 6455's.
const (
	StatusHeartbeatTimeout websocket.StatusCode = 4000
	StatusUnauthenticated  websocket.StatusCode = 4001
)

// session is one /rpc connection: authentication, heartbeats,
// subscriptions, and method routing.
type session struct {
	srv    *Server
	ws     *websocket.Conn
	codec  codec.Codec
	conn   *rpc.Conn
	t      *wsTransport
	id     string
	remote string
	trace  string // W3C trace id of the upgrade request, if any

	lastRecv atomic.Int64 // Unix ns of the last frame from the peer

	mu        sync.Mutex
	principal *auth.Principal // nil until auth succeeds
	subs      subTable
	closed    bool // subs is closed to new entries

	// Timers instead of a goroutine per session: an idle connection costs
	// only its reader.
	closeCode websocket.StatusCode
	closeMsg  string
	authTimer *time.Timer
	tIndex    int   // place in the server's heartbeat heap, -1 when absent (srv.timers.mu)
	tDue      int64 // Unix ns of the next heartbeat check (srv.timers.mu)
	ticking   bool  // heartbeats started
	started   bool  // start has run: until then finish waits (closeWith leaves it to start)
	closing   bool  // closeWith has been called
	expAt     int64 // the token's expiry, Unix ns; zero until authenticated
	lastSent  int64 // last heartbeat sent, Unix ns
	finished  bool
}

// clientSub is one entry of the connection's subscription-id namespace.
type clientSub struct {
	stream *streams.Subscription // nil for planner watches
	kind   string                // metrics label: project, item, planner
	cancel func()                // ends a planner watch
}

func newSession(srv *Server, ws *websocket.Conn, lw *leanWriter, c codec.Codec, r *http.Request) *session {
	s := &session{
		srv: srv, ws: ws, codec: c, id: newConnID(), tIndex: -1,
	}
	s.remote = r.RemoteAddr
	s.trace = traceID(r.Header.Get("traceparent"))
	typ := websocket.MessageText
	if c.Binary() {
		typ = websocket.MessageBinary
	}
	t := &wsTransport{ws: ws, typ: typ, cork: lw.conn, br: lw.br, sess: s}
	t.pc = srv.idle.conn(lw.conn.raw)
	s.t = t
	s.conn = rpc.NewConn(t, c, &rpc.Options{
		Handler:   s,
		Inline:    func(m string) bool { return m == "auth" },
		OnMessage: func() { s.lastRecv.Store(time.Now().UnixNano()) },
		// When the peer closes or the transport fails, finish without a code.
		OnDone: func(error) { s.closeWith(0, "") },
		Logger: srv.logger,
	})
	return s
}

func (s *session) start() {
	s.srv.metrics.Connections.WithLabelValues(s.codecLabel()).Inc()
	s.srv.metrics.Connects.WithLabelValues(s.codecLabel()).Inc()
	now := time.Now()
	s.lastRecv.Store(now.UnixNano())
	s.lastSent = now.UnixNano()
	// Not derived from a server context: the server ends its sessions one
	// by one (abort), and a context with no parent to watch costs nothing
	// per connection.
	s.conn.Start(context.Background())
	if s.srv.ctx.Err() != nil {
		s.conn.Abort(ErrServerClosed) // Shutdown gave up waiting meanwhile
	}
	s.mu.Lock()
	s.started = true
	closing := s.closing
	if !closing {
		s.authTimer = time.AfterFunc(s.srv.cfg.AuthTimeout, func() {
			if s.getPrincipal() == nil {
				s.srv.metrics.AuthFailures.WithLabelValues("timeout").Inc()
				s.closeWith(StatusUnauthenticated, "no auth request in time")
			}
		})
		s.ticking = true
		s.rescheduleLocked(time.Now()) // an auth may have set the expiry already
	}
	s.mu.Unlock()
	s.lg().Debug("connection opened")
	if closing {
		go s.finish() // closed (by Shutdown, or the connection ended) while starting
	}
}

// closeWith closes the session: with a WebSocket close code chosen by the
// server, or 0 when the connection already ended. The first call wins; it
// never blocks. Before start has run, start finishes the session.
func (s *session) closeWith(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing = true
	s.closeCode, s.closeMsg = code, reason
	started := s.started
	s.mu.Unlock()
	if started {
		go s.finish()
	}
}

// heartbeat runs from the server's heartbeat timers: it closes a connection whose
// token expired (4001) or that went silent (4000), or sends $/heartbeat,
// then sleeps until the next of the three is due.
func (s *session) heartbeat() {
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
	if now.Sub(time.Unix(0, s.lastRecv.Load())) >= 3*interval {
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
	if s.finished || !s.ticking {
		return
	}
	interval := s.srv.cfg.HeartbeatInterval
	next := min(time.Unix(0, s.lastSent).Add(interval).Sub(now), time.Unix(0, s.lastRecv.Load()).Add(3*interval).Sub(now))
	if s.expAt != 0 {
		next = min(next, time.Unix(0, s.expAt).Sub(now))
	}
	s.srv.timers.schedule(s, now.Add(max(next, time.Millisecond)).UnixNano())
}

func (s *session) sendHeartbeat() {
	frame, err := s.notification("$/heartbeat", heartbeat{Time: s.srv.now().UnixMilli()})
	if err == nil && s.conn.TrySend(frame, nil) {
		s.srv.metrics.MessagesOut.WithLabelValues("$/heartbeat").Inc()
	}
}

func (s *session) notification(method string, params any) ([]byte, error) {
	raw, err := s.codec.Marshal(params)
	if err != nil {
		return nil, err
	}
	return s.codec.Encode(nil, &codec.Message{Method: method, Params: raw})
}

// finish closes the WebSocket (after flushing what is queued when the
// server chose to close) and releases everything the session holds.
func (s *session) finish() {
	defer s.srv.untrack(s)
	s.mu.Lock()
	code, reason := s.closeCode, s.closeMsg
	s.finished = true
	if s.authTimer != nil {
		s.authTimer.Stop()
	}
	s.srv.timers.remove(s)
	s.mu.Unlock()
	s.t.beginClose()
	if code != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.conn.Flush(ctx)
		cancel()
		_ = s.ws.Close(code, reason)
	} else {
		// The peer closed, or the transport failed.
		code = websocket.CloseStatus(s.conn.Err())
		if code == -1 {
			switch {
			case errors.Is(s.conn.Err(), errWrongFrameKind):
				code = websocket.StatusUnsupportedData
			case errors.Is(s.conn.Err(), errInvalidUTF8):
				code = websocket.StatusInvalidFramePayloadData
			default:
				code = websocket.StatusAbnormalClosure
			}
		}
		_ = s.ws.CloseNow()
	}
	_ = s.conn.Close()
	s.mu.Lock()
	s.closed = true
	subs := s.subs.all()
	s.mu.Unlock()
	for _, e := range subs {
		s.forget(e.id, e.cs)
	}
	s.srv.metrics.Connections.WithLabelValues(s.codecLabel()).Dec()
	s.srv.metrics.Closes.WithLabelValues(codeLabel(int(code))).Inc()
	s.lg().Debug("connection closed", "code", int(code), "reason", reason)
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

func (s *session) getPrincipal() *auth.Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.principal
}

type heartbeat struct {
	Time int64 `json:"time"`
}

type tokenParams struct {
	Token string `json:"token"`
}

type authResult struct {
	Subject   string `json:"subject"`
	ExpiresAt int64  `json:"expires_at"`
}

// handle routes one request or notification.
// Handle serves one request (rpc.Handler).
func (s *session) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	return s.handle(ctx, req)
}

// wrongKind ends a session whose client sent a frame of the other codec's kind.
func (s *session) wrongKind() {
	s.closeWith(websocket.StatusUnsupportedData, "frame kind does not match the subprotocol")
}

// abort ends the session now: the rpc connection ends and the socket is
// closed under whatever the WebSocket library is doing (a close handshake
// waits for the peer).
func (s *session) abort() {
	s.conn.Abort(ErrServerClosed)
	s.t.beginClose()
	_ = s.t.cork.Close()
}

// codecLabel is the codec's metrics label.
func (s *session) codecLabel() string {
	if s.codec.Binary() {
		return "msgpack"
	}
	return "json"
}

func (s *session) handle(ctx context.Context, req *rpc.Request) (result any, err error) {
	s.srv.metrics.MessagesIn.WithLabelValues(methodLabel(req.Method)).Inc()
	if !req.Notification {
		start := time.Now()
		defer func() {
			m := methodLabel(req.Method)
			s.srv.metrics.Requests.WithLabelValues(m, codeLabel(rpc.Code(errOrNil(err)))).Inc()
			s.srv.metrics.RequestDuration.WithLabelValues(m).Observe(time.Since(start).Seconds())
		}()
	}
	p := s.getPrincipal()
	if p == nil {
		if req.Method != "auth" || req.Notification {
			s.srv.metrics.AuthFailures.WithLabelValues("no_auth").Inc()
			s.closeWith(StatusUnauthenticated, "the first message must be an auth request")
			return nil, rpc.Errorf(rpc.ErrUnauthenticated, "the first message must be an auth request")
		}
		return s.auth(ctx, req)
	}
	switch req.Method {
	case "$/heartbeat":
		return nil, nil
	case "auth":
		return nil, rpc.Errorf(rpc.ErrInvalidRequest, "already authenticated: use auth.refresh")
	case "auth.refresh":
		return s.refresh(ctx, req)
	case "system.ping":
		return map[string]any{"time": s.srv.now().UnixMilli(), "subject": p.Subject}, nil
	case "stream.subscribe":
		return s.subscribe(ctx, req, p)
	case "stream.unsubscribe":
		return s.unsubscribe(req)
	case "planner.send", "planner.cancel", "planner.watch":
		if s.srv.planner == nil {
			break
		}
		switch req.Method {
		case "planner.send":
			return s.plannerSend(ctx, req, p)
		case "planner.cancel":
			return s.plannerCancel(ctx, req, p)
		default:
			return s.plannerWatch(ctx, req, p)
		}
	}
	return nil, rpc.Errorf(rpc.ErrMethodNotFound, "method %s not found", req.Method)
}

func errOrNil(err error) error {
	if err == nil {
		return nil
	}
	if rpc.Code(err) == 0 {
		return rpc.ErrInternal
	}
	return err
}

func (s *session) verify(ctx context.Context, req *rpc.Request) (*auth.Principal, error) {
	var tp tokenParams
	if err := req.Decode(&tp); err != nil {
		return nil, err
	}
	if tp.Token == "" {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "params.token is required")
	}
	// Bounded by its own timeout, not the connection's context: a context
	// derived from that one would leave a table of children on it for the
	// connection's life.
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p, err := s.srv.verifier.Verify(vctx, tp.Token)
	if err != nil {
		reason := auth.Reason(err)
		s.srv.metrics.AuthFailures.WithLabelValues(reason).Inc()
		s.lg().Info("token rejected", "method", req.Method, "reason", reason)
		return nil, rpc.Errorf(rpc.ErrUnauthenticated, "invalid token (%s)", reason)
	}
	return p, nil
}

func (s *session) auth(ctx context.Context, req *rpc.Request) (any, error) {
	p, err := s.verify(ctx, req)
	if err != nil {
		req.AfterReply(func() { s.closeWith(StatusUnauthenticated, "invalid token") })
		return nil, err
	}
	s.mu.Lock()
	s.principal = p
	s.mu.Unlock()
	s.setExpiry(p.ExpiresAt)
	s.lg().Info("authenticated", "human", p.Human)
	s.mu.Lock()
	if s.authTimer != nil {
		s.authTimer.Stop()
		s.authTimer = nil // an idle connection keeps only what it needs
	}
	s.mu.Unlock()
	return authResult{Subject: p.Subject, ExpiresAt: p.ExpiresAt.Unix()}, nil
}

func (s *session) refresh(ctx context.Context, req *rpc.Request) (any, error) {
	p, err := s.verify(ctx, req)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	old := s.principal
	if p.Subject != old.Subject {
		s.mu.Unlock()
		s.srv.metrics.AuthFailures.WithLabelValues("subject_changed").Inc()
		return nil, rpc.Errorf(rpc.ErrUnauthenticated, "auth.refresh must keep the subject %q", old.Subject)
	}
	s.principal = p
	s.mu.Unlock()
	s.setExpiry(p.ExpiresAt)
	return authResult{Subject: p.Subject, ExpiresAt: p.ExpiresAt.Unix()}, nil
}

// setExpiry closes the connection with 4001 when the token expires, unless
// a refresh moves the expiry first.
func (s *session) setExpiry(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expAt = 0
	if !at.IsZero() {
		s.expAt = at.UnixNano()
	}
	s.rescheduleLocked(time.Now())
}

// Subscription ids: 1–64 characters, unique on the connection across
// stream.subscribe and planner.watch.
func checkSubID(id string) error {
	n := 0
	for range id {
		n++
	}
	if n < 1 || n > 64 {
		return rpc.Errorf(rpc.ErrInvalidParams, "subscription must be 1 to 64 characters, got %d", n)
	}
	if !streams.ValidText(id) {
		return rpc.Errorf(rpc.ErrInvalidParams, "subscription must be UTF-8 text")
	}
	return nil
}

// reserve claims a subscription id in the connection's namespace.
func (s *session) reserve(id string, cs *clientSub) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return rpc.ErrClosed
	}
	if _, dup := s.subs.get(id); dup {
		return rpc.Errorf(rpc.ErrInvalidParams, "subscription %q is already in use on this connection", id)
	}
	s.subs.put(id, cs)
	s.srv.metrics.Subscriptions.WithLabelValues(cs.kind).Inc()
	return nil
}

type subscribeParams struct {
	Subscription string `json:"subscription"`
	Stream       string `json:"stream"`
	FromSeq      *int64 `json:"from_seq"`
}

type subscribeResult struct {
	Subscription string `json:"subscription"`
	Seq          int64  `json:"seq"`
}

type closedParams struct {
	Subscription string `json:"subscription"`
	Reason       string `json:"reason"`
}

func (s *session) subscribe(ctx context.Context, req *rpc.Request, p *auth.Principal) (any, error) {
	var sp subscribeParams
	if err := req.Decode(&sp); err != nil {
		return nil, err
	}
	if err := checkSubID(sp.Subscription); err != nil {
		return nil, err
	}
	st, err := streams.ParseStream(sp.Stream)
	if err != nil {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "stream %q: want project:<KEY> or item:<KEY>", sp.Stream)
	}
	if sp.FromSeq != nil && *sp.FromSeq < 0 {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "from_seq must not be negative")
	}
	// Short queries; see verify for why not on the connection's context.
	if err := s.authorize(context.WithoutCancel(ctx), st, p, auth.PermRead); err != nil {
		return nil, err
	}
	kind := st.Kind.String()
	cs := &clientSub{kind: kind}
	if err := s.reserve(sp.Subscription, cs); err != nil {
		return nil, err
	}
	sub, head, err := s.srv.hub.Subscribe(ctx, s.srv.log, streams.SubscribeRequest{
		ID: sp.Subscription, Subject: p.Subject, Stream: st, Codec: s.codec, Out: s,
		FromSeq: sp.FromSeq, QueueLimit: s.srv.cfg.SubscriberQueue, ReplayLimit: s.srv.cfg.ReplayLimit,
		OnClosed: s.subClosed,
	})
	if err != nil {
		s.forget(sp.Subscription, cs)
		if errors.Is(err, streams.ErrResyncRequired) {
			return nil, rpc.Errorf(rpc.ErrResyncRequired, "resync required: %s", resyncDetail(err))
		}
		return nil, fmt.Errorf("subscribe %s: %w", st, err)
	}
	s.mu.Lock()
	cur, _ := s.subs.get(sp.Subscription)
	current := cur == cs
	if current {
		cs.stream = sub
	}
	s.mu.Unlock()
	if !current {
		// Closed while subscribing (lagging during the replay, or the
		// connection ended): the client hears of it through stream.closed.
		s.srv.hub.Unsubscribe(sub)
	}
	if sp.FromSeq != nil {
		s.srv.metrics.ReplayEvents.Observe(float64(sub.Replayed()))
	}
	return subscribeResult{Subscription: sp.Subscription, Seq: head}, nil
}

func resyncDetail(err error) string {
	msg := err.Error()
	// "subscribe project:X: <detail>: streams: resync required"
	const suffix = ": " + "streams: resync required"
	if len(msg) > len(suffix) && msg[len(msg)-len(suffix):] == suffix {
		msg = msg[:len(msg)-len(suffix)]
	}
	return msg
}

// authorize checks perm on the stream's project: -32004 for an unknown
// project, -32003 without the permission.
func (s *session) authorize(ctx context.Context, st streams.Stream, p *auth.Principal, perm auth.Perm) error {
	project := st.Project()
	if project == "" {
		return rpc.Errorf(rpc.ErrNotFound, "%s not found", st)
	}
	role, exists, err := s.srv.roles.Role(ctx, project, p.Subject)
	if err != nil {
		return fmt.Errorf("role of %s in %s: %w", p.Subject, project, err)
	}
	if !exists {
		return rpc.Errorf(rpc.ErrNotFound, "project %s not found", project)
	}
	if !auth.Role(role).Has(perm) {
		return rpc.Errorf(rpc.ErrForbidden, "%s on project %s is required", perm, project)
	}
	if st.Kind == streams.StreamItem && s.srv.items != nil {
		ok, err := s.srv.items.ItemExists(ctx, st.Key)
		if err != nil {
			return fmt.Errorf("item %s: %w", st.Key, err)
		}
		if !ok {
			return rpc.Errorf(rpc.ErrNotFound, "item %s not found", st.Key)
		}
	}
	return nil
}

// subClosed runs when the hub closes a subscription (lagging, forbidden,
// not_found): it leaves the namespace and the client is told.
func (s *session) subClosed(sub *streams.Subscription, reason string) {
	s.mu.Lock()
	cs, ok := s.subs.get(sub.ID())
	mine := ok && (cs.stream == sub || cs.stream == nil)
	s.mu.Unlock()
	if !mine || !s.forget(sub.ID(), cs) {
		return
	}
	s.serverClosed(sub.ID(), reason)
}

type unsubscribeParams struct {
	Subscription string `json:"subscription"`
}

func (s *session) unsubscribe(req *rpc.Request) (any, error) {
	var up unsubscribeParams
	if err := req.Decode(&up); err != nil {
		return nil, err
	}
	s.mu.Lock()
	cs, ok := s.subs.get(up.Subscription)
	s.mu.Unlock()
	if !ok || !s.forget(up.Subscription, cs) {
		return nil, rpc.Errorf(rpc.ErrNotFound, "subscription %q not found", up.Subscription)
	}
	return struct{}{}, nil
}

// lg returns a logger with the connection's attributes. It is built on use
// (logging is rare) rather than kept: an idle connection should not hold one.
func (s *session) lg() *slog.Logger {
	attrs := make([]any, 0, 10)
	attrs = append(attrs, "conn", s.id, "codec", s.codecLabel(), "remote", s.remote)
	if s.trace != "" {
		attrs = append(attrs, "trace_id", s.trace)
	}
	if p := s.getPrincipal(); p != nil {
		attrs = append(attrs, "subject", p.Subject)
	}
	return s.srv.logger.With(attrs...)
}

// TrySendSpliced queues one stream.event frame for a subscription and
// counts it (streams.Sender).
func (s *session) TrySendSpliced(method, sub string, body []byte, done func()) bool {
	if !s.conn.TrySendSpliced(method, sub, body, done) {
		return false
	}
	s.srv.metrics.EventsDelivered.Inc()
	return true
}

// TrySendSplicedBatch is TrySendSpliced for several events (streams.Sender).
func (s *session) TrySendSplicedBatch(method, sub string, bodies [][]byte, room int, done func()) bool {
	if !s.conn.TrySendSplicedBatch(method, sub, bodies, room, done) {
		return false
	}
	s.srv.metrics.EventsDelivered.Add(float64(len(bodies)))
	return true
}
