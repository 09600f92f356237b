package gateway

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/edge"
	"github.com/ballet/gateway/gateway/internal/timerheap"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/internal/admission"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/internal/tracing"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// TokenVerifier checks an OIDC access token.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*auth.Principal, error)
}

// Roles tells a subject's role in a project.
type Roles interface {
	Role(ctx context.Context, project, subject string) (role string, projectExists bool, err error)
}

var (
	_ TokenVerifier = (*auth.Verifier)(nil)
	_ Roles         = streams.ProjectStore(nil)
)

// Options configure a Server. Verifier, Log, Hub and Roles are required.
type Options struct {
	Config   Config
	Verifier TokenVerifier
	Log      streams.Log
	Hub      *streams.Hub
	Roles    Roles
	// Planner serves planner.send, planner.cancel and planner.watch; without
	// it they are not found.
	Planner Planner
	// PresenceStore shares presence between replicas (pgpresence); nil keeps it in this
	// process, which is right for a single replica (dev).
	PresenceStore presence.Store
	Metrics       *Metrics // nil: a new set on its own registry
	Logger        *slog.Logger
	// Ready reports whether the gateway's dependencies are up (for /readyz).
	Ready func(ctx context.Context) error
	// Root serves / on the client port, when set (the development UI).
	Root http.Handler
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RESTTimeout bounds the time to read a REST request's body and to
	// write its answer, so that a client trickling bytes cannot hold a
	// connection. Default 30s.
	RESTTimeout time.Duration
	// WebSockets adjust the /rpc connections' sockets; nil means their defaults.
	WebSockets *wsnet.Options
	// Revocations, when set, are the operators' sign-outs and blocks that Verifier refuses
	// (it is Revocations.Verifier of the issuer's): auth checks them again once the
	// connection is its subject's, so that one authenticating while a sign-out is applied
	// is closed too.
	Revocations *auth.Revocations
	// TracerProvider, when set, records a span for each REST request, /rpc upgrade and
	// JSON-RPC request (docs/tracing.md); nil records none and reads nothing for them.
	TracerProvider trace.TracerProvider
	// AttributeValueLength is TracerProvider's limit of an attribute value, in characters
	// (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT): a client's text a span records (User-Agent, the
	// path, the host) is copied that long at most, so that a span held until its export does
	// not keep a whole header; zero means tracing.DefaultAttributeValueLength.
	AttributeValueLength int
}

// ErrServerClosed is returned by Accepting calls after Shutdown.
var ErrServerClosed = errors.New("gateway: server closed")

// Server is the realtime gateway: /rpc sessions and the HTTP endpoints.
type Server struct {
	cfg      Config
	verifier TokenVerifier
	log      streams.Log
	hub      *streams.Hub
	roles    Roles
	planner  Planner
	presence *presence.Registry
	metrics  *Metrics
	logger   *slog.Logger
	ready    func(ctx context.Context) error
	api      http.Handler // SetAPI's
	root     http.Handler
	now      func() time.Time
	restTime time.Duration
	revs     *auth.Revocations // nil: none
	tracer   trace.Tracer      // nil: no spans
	attrLen  int               // the longest client text a span keeps, in characters

	ctx      context.Context // cancelled when Shutdown stops waiting for sessions
	cancel   context.CancelFunc
	draining atomic.Bool

	upgrader *wsnet.Upgrader            // the /rpc connections' sockets, whose idle readers park
	timers   timerheap.Timers[*session] // every session's heartbeat
	workers  *rpc.Workers               // the connections' writers and resumed readers

	mu       sync.Mutex
	sessions []*session // each at its slot; a slice rather than a map costs each session 8 bytes

	queued  *rpc.Total                   // what the sessions' connections have queued (shed.go)
	shedder *admission.Shedder[*session] // BALLET_REPLICA_QUEUE_BYTES: closes the most behind past it
	wg      sync.WaitGroup

	conns    *admission.Conns     // connections being opened or open (BALLET_MAX_CONNECTIONS)
	sockets  *edge.Sockets        // the client port's sockets, through Listener
	addrRate *httpapi.SubjectRate // BALLET_ADDR_RATE: budgets of addresses not authenticated
	// Authenticated connections and their budgets by subject (BALLET_MAX_CONNECTIONS_PER_SUBJECT).
	subjects *admission.Subjects[*session, *subjectBudget]
}

// NewServer returns a server; it serves nothing until its handlers are mounted.
func NewServer(o *Options) (*Server, error) {
	if o == nil || o.Verifier == nil || o.Log == nil || o.Hub == nil || o.Roles == nil {
		return nil, errors.New("gateway: Verifier, Log, Hub and Roles are required")
	}
	s := &Server{
		cfg: o.Config.WithDefaults(), verifier: o.Verifier, log: o.Log, hub: o.Hub, roles: o.Roles, planner: o.Planner,
		metrics: o.Metrics, logger: o.Logger, ready: o.Ready, root: o.Root, now: o.Now, restTime: o.RESTTimeout,
		revs:    o.Revocations,
		workers: rpc.NewWorkers(),
	}
	if o.TracerProvider != nil {
		s.tracer = o.TracerProvider.Tracer(tracerName)
	}
	s.attrLen = o.AttributeValueLength
	if s.attrLen <= 0 {
		s.attrLen = tracing.DefaultAttributeValueLength
	}
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	s.upgrader = wsnet.NewUpgrader(s.webSocketOptions(o.WebSockets))
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.ready == nil {
		s.ready = func(context.Context) error { return nil }
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.restTime <= 0 {
		s.restTime = 30 * time.Second
	}
	// Owned by the server: it has a goroutine only while presence changes are due, and
	// Shutdown closes it.
	s.presence = presence.New(&presence.Options{
		Store: o.PresenceStore, Window: s.cfg.PresenceWindow, MaxMembers: s.cfg.PresenceMaxMembers,
		OnMembers: func(stream string, d int) {
			if !strings.HasPrefix(stream, itemsPrefix) { // counted on the item's own stream
				s.metrics.PresenceMembers.Add(float64(d))
			}
		}, Logger: s.logger,
	})
	s.sockets = edge.New(&edge.Options{
		MaxConnections: s.cfg.MaxConnections, MaxConnectionsPerIP: s.cfg.MaxConnectionsPerIP,
		MaxPendingSockets: s.cfg.MaxPendingSockets, SocketBufferBytes: s.cfg.SocketBufferBytes,
		TrustedProxies: s.cfg.TrustedProxies, States: s.metrics.Sockets, Evicted: s.metrics.SocketsEvicted,
		OnRefused: func(limit string) { s.metrics.LimitRejections.WithLabelValues(limit).Inc() },
	})
	s.addrRate = s.newAddrRate()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.shedder, s.queued = s.newShedder()
	s.conns = admission.NewConns(s.cfg.MaxConnections)
	s.subjects = admission.NewSubjects[*session](s.cfg.MaxConnectionsPerSubject, newSubjectBudget)
	return s, nil
}

// Listener counts the sockets ln accepts (BALLET_MAX_CONNECTIONS,
// BALLET_MAX_CONNECTIONS_PER_IP, BALLET_MAX_PENDING_SOCKETS); serve the client port with it and
// with HTTPServer (edge.Sockets).
func (s *Server) Listener(ln net.Listener) net.Listener { return s.sockets.Listener(ln) }

// HTTPServer is the client port's HTTP server for h: the deadlines of the sockets it holds,
// and their accounting, with Listener.
func (s *Server) HTTPServer(h http.Handler, errLog *log.Logger) *http.Server {
	return s.sockets.HTTPServer(h, errLog)
}

// releaseAddr gives back an /rpc connection's count of its address once it authenticates or ends.
func (s *Server) releaseAddr(addr netip.Addr) { s.sockets.ReleaseAddr(addr) }

func (s *Server) trustedProxy(a netip.Addr) bool { return s.sockets.TrustedProxy(a) }

// clientAddr is the address r comes from, behind the trusted proxies (edge.Sockets.ClientAddr).
func (s *Server) clientAddr(r *http.Request) netip.Addr { return s.sockets.ClientAddr(r) }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// SetAPI makes h serve /api/v1/ on the client port: the REST surfaces, which may need the
// server itself (the operators' listing of its connections), so they are built after it. Call
// it before Handler.
func (s *Server) SetAPI(h http.Handler) { s.api = h }

// Handler serves the client port: /rpc, /healthz, and /api/v1/ when SetAPI set it.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /rpc", s.serveRPC)
	mux.HandleFunc("POST /rpc", s.servePost)
	mux.HandleFunc("OPTIONS /rpc", s.preflight)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	if s.api != nil {
		mux.Handle("/api/v1/", s.accessLog(s.api))
	}
	if s.root != nil {
		mux.Handle("/", s.root)
	}
	return mux
}

// AdminHandler serves the admin port: /metrics, /readyz, /healthz, and /debug/pprof/ when
// Config.Pprof is set.
func (s *Server) AdminHandler() http.Handler {
	return edge.Admin(&edge.AdminOptions{Metrics: s.metrics.Registry, Draining: s.draining.Load, Ready: s.ready, Pprof: s.cfg.Pprof})
}

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	if s.tracer == nil {
		s.upgrade(w, r)
		return
	}
	// The session reads the upgrade's span from the request's context (session.init).
	ctx, span := s.startHTTP(r)
	uw := &upgradeWriter{edge.NewStatusWriter(w)}
	s.upgrade(uw, r.WithContext(ctx))
	endHTTP(span, r.Method, "/rpc", uw.Status)
}

// upgrade serves GET /rpc: a refusal, or a WebSocket whose session it starts.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	// A refused handshake's socket is closed after the answer, not kept alive.
	w.Header().Set("Connection", "close")
	if s.draining.Load() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
		return
	}
	if !s.admitUpgrade(w, r) {
		return
	}
	sc := edge.SocketOf(r)
	addr, lent, counted := s.acquireAddr(w, r, sc)
	if !counted {
		return
	}
	release := func() {
		// A lent count stays the socket's while net/http has it, unless the hijack took it.
		if addr.IsValid() && (!lent || s.sockets.Unlend(sc)) {
			s.sockets.ReleaseAddr(addr)
		}
	}
	if !s.acquireConn(w) {
		release()
		return
	}
	sess := &session{srv: s} // set up by init before anything is read
	t, err := s.upgrader.Accept(w, r, &wsnet.AcceptOptions{
		Subprotocols:   []string{codec.NameMsgPack, codec.NameJSON},
		OriginPatterns: s.cfg.AllowedOrigins,
	})
	if err != nil {
		// Accept has already answered (403 for a foreign Origin, 400/426 for a bad handshake).
		s.logger.Debug("websocket upgrade refused", "err", err, "remote", r.RemoteAddr)
		s.releaseConn()
		release()
		return
	}
	if lent && !s.sockets.Unlend(sc) {
		// The socket was closed before the hijack, and its count with it.
		t.Abort()
		s.releaseConn()
		return
	}
	lent = false // the session's now
	c := codec.ByName(t.Subprotocol())
	if c == nil {
		s.metrics.Closes.WithLabelValues(codeLabel(int(websocket.StatusPolicyViolation)), transportWebSocket).Inc()
		_ = t.CloseHandshake(websocket.StatusPolicyViolation, "offer subprotocol ballet.v1.msgpack or ballet.v1.json")
		s.releaseConn()
		release()
		return
	}
	sess.init(t, c, r, addr)
	if !s.track(sess) {
		_ = t.CloseHandshake(websocket.StatusGoingAway, "the gateway is shutting down")
		s.releaseConn()
		release()
		return
	}
	// The session runs on its own goroutines; the handler returns so that
	// net/http releases the request's memory.
	sess.start()
}

// acquireAddr counts an /rpc connection against BALLET_MAX_CONNECTIONS_PER_IP until it
// authenticates: with the count its socket sc holds of the same address (lent, taken on at the
// hijack), else a count of its own; counted false when the client's address is at the limit and
// was answered 503. The zero netip.Addr when the address is unknown (not counted).
func (s *Server) acquireAddr(w http.ResponseWriter, r *http.Request, sc *edge.Socket) (addr netip.Addr, lent, counted bool) {
	a := s.clientAddr(r)
	if !a.IsValid() {
		return netip.Addr{}, false, true
	}
	k := edge.KeyOf(a)
	if s.sockets.Lend(sc, k) {
		return k, true, true
	}
	if s.sockets.AcquireAddr(k) {
		return k, false, true
	}
	s.metrics.LimitRejections.WithLabelValues(limitAddrConns).Inc()
	s.logger.Info("connection refused: too many unauthenticated connections from its address", "addr", k.String(),
		"max", s.cfg.MaxConnectionsPerIP)
	w.Header().Set("Retry-After", strconv.Itoa(int(overloadRetryAfter/time.Second)))
	http.Error(w, "too many connections from this address are not authenticated; try again later", http.StatusServiceUnavailable)
	return netip.Addr{}, false, false
}

func (s *Server) track(sess *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return false
	}
	sess.slot = len(s.sessions)
	s.sessions = append(s.sessions, sess)
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(sess *session) {
	s.mu.Lock()
	last := len(s.sessions) - 1
	moved := s.sessions[last]
	s.sessions[sess.slot], moved.slot = moved, sess.slot
	s.sessions[last] = nil
	s.sessions = s.sessions[:last]
	s.mu.Unlock()
	s.releaseConn()
	s.wg.Done()
}

// Sessions returns the number of open /rpc sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// DrainWindow returns the window Shutdown spreads the sessions' closes over, as applied
// (Config.DrainWindow or its default).
func (s *Server) DrainWindow() time.Duration { return s.cfg.DrainWindow }

// BeginDrain turns /readyz unready and refuses new /rpc sessions; open
// sessions stay until Shutdown closes them.
func (s *Server) BeginDrain() {
	s.mu.Lock()
	s.draining.Store(true)
	s.mu.Unlock()
}

// Shutdown stops accepting /rpc sessions, then closes the open ones with
// 1001 (going away), spread evenly over the drain window in random order so
// clients do not all reconnect in the same second, and waits for them to end
// or for ctx. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	s.mu.Unlock()
	open := s.openSessions()
	rand.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
	window := s.cfg.DrainWindow
	if dl, ok := ctx.Deadline(); ok {
		// Leave a second for the close handshakes.
		if left := time.Until(dl) - time.Second; left < window {
			window = max(left, 0)
		}
	}
	start := time.Now()
	for i, sess := range open {
		at := start.Add(time.Duration(int64(window) * int64(i) / int64(max(len(open), 1))))
		if d := time.Until(at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		sess.closeWith(websocket.StatusGoingAway, "the gateway is shutting down")
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		s.shedder.Close()
		s.workers.Close()
		s.presence.Close()
		return nil
	case <-ctx.Done():
		s.cancel()
		s.abortAll() // ends every session now
		<-done
		s.shedder.Close()
		s.workers.Close()
		s.presence.Close()
		return ctx.Err()
	}
}

// abortAll ends every open session at once: a session in a close
// handshake with a peer that does not answer ends too, without waiting
// for the WebSocket library's handshake timeout.
func (s *Server) abortAll() {
	for _, sess := range s.openSessions() {
		sess.abort()
	}
}

// openSessions returns the sessions open now.
func (s *Server) openSessions() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sessions)
}

// newConnID is a connection's random id (see session.connID).
func newConnID() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// accessLog bounds each REST request's time (RESTTimeout), and each write of its answer to
// RESTWriteStall, and logs it with its outcome and its trace id (edge.AccessLog): its span's when
// tracing is on, else the one of its W3C traceparent, when it carries one (a malformed header is
// ignored).
func (s *Server) accessLog(h http.Handler) http.Handler {
	served := s.addrLimited(h)
	return edge.AccessLog(&edge.AccessLogOptions{Logger: s.logger, Timeout: s.restTime, WriteStall: s.cfg.RESTWriteStall,
		Serve: func(w *edge.StatusWriter, r *http.Request) string {
			if s.tracer != nil {
				return s.traced(served, w, r)
			}
			served.ServeHTTP(w, r)
			return traceID(r.Header.Get("traceparent"))
		}})
}
