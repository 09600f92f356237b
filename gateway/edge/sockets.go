// Sockets on the client port: every socket counts against BALLET_MAX_CONNECTIONS from accept
// to close, whatever it carries; the sockets of one address are bounded by
// BALLET_MAX_CONNECTIONS_PER_IP from accept until a session authenticates on one (the count
// passes from the socket to its /rpc session at the upgrade); the sockets that are not yet a
// session nor idle (new, and active: a request being read or served), which cost several times
// an idle session, are bounded by BALLET_MAX_PENDING_SOCKETS across all addresses; and no socket
// is held without a deadline.

package edge

import (
	"bufio"
	"container/list"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/gateway/gateway/internal/wsnet"
)

// Deadlines of the client port's sockets in the states that net/http holds them in (the
// session's own are the auth timeout, the heartbeat rule and wsnet.CloseGrace).
const (
	// requestHeaderTimeout bounds the time to send a request's header, from the socket's
	// accept or from the end of the previous request.
	requestHeaderTimeout = 5 * time.Second
	// keepAliveIdle is how long a keep-alive socket may wait for its next request.
	keepAliveIdle = 30 * time.Second
	// bodyGrace bounds the wait for a request's body, from the end of its header, on every
	// route but /api/v1/ (whose RESTTimeout bounds reading a body it takes). None of them takes a
	// body: the answer goes at once and the socket is closed after it, once what the client sent
	// is read (so that the close does not reset the answer) or the grace is over. A GET /rpc
	// with a body is refused 400 as a bad handshake.
	bodyGrace = wsnet.CloseGrace
)

// sockState is where a socket is; its name is the label of ballet_gateway_sockets.
type sockState uint8

const (
	sockGone    sockState = iota // not counted: refused, or closed and forgotten
	sockNew                      // accepted, no request read yet
	sockActive                   // an HTTP request being served
	sockIdle                     // keep-alive, waiting for the next request
	sockSession                  // a /rpc WebSocket
)

var sockStateNames = [...]string{sockNew: "new", sockActive: "active", sockIdle: "idle", sockSession: "session"}

func (st sockState) String() string { return sockStateNames[st] }

// maxRefusing bounds the refused sockets being answered 503 at once; past it a refused
// socket is closed without an answer.
const maxRefusing = 64

// Options configure the client port's sockets; the gateway fills them from its Config, with
// its defaults applied.
type Options struct {
	MaxConnections      int // BALLET_MAX_CONNECTIONS
	MaxConnectionsPerIP int // BALLET_MAX_CONNECTIONS_PER_IP
	// MaxPendingSockets is BALLET_MAX_PENDING_SOCKETS; zero means a sixteenth of
	// MaxConnections, at least 1024.
	MaxPendingSockets int
	SocketBufferBytes int // BALLET_SOCKET_BUFFER_BYTES: each socket's kernel buffers
	// TrustedProxies are the peers whose X-Forwarded-For names the client's address, and whose
	// sockets no address limit counts (BALLET_TRUSTED_PROXIES).
	TrustedProxies []netip.Prefix

	States    *prometheus.GaugeVec // open sockets by state (ballet_gateway_sockets)
	Evicted   prometheus.Counter   // idle keep-alive sockets closed to make room
	OnRefused func(limit string)   // a socket refused at accept, by the limit it is beyond
}

// The limits a socket is refused by, as the limit label of ballet_gateway_limit_rejections_total
// names them.
const (
	LimitConnections = "connections"
	LimitAddrConns   = "connections_per_ip"
	// A socket refused 503 as the replica had BALLET_MAX_PENDING_SOCKETS sockets not yet a
	// session nor idle.
	LimitPendingSockets = "pending_sockets"
)

// RetryAfter is the Retry-After of the 503 a full replica answers: long enough for a load
// balancer to send the retry elsewhere.
const RetryAfter = 5 * time.Second

// Sockets counts the client port's sockets.
type Sockets struct {
	o          Options
	max        int // BALLET_MAX_CONNECTIONS
	maxIdle    int // idle keep-alive sockets at most: the longest idle is closed past it
	maxPending int // BALLET_MAX_PENDING_SOCKETS: new sockets are refused while this many are pending

	mu       sync.Mutex
	open     int
	pending  int                // sockets new or active (pendingState)
	idle     list.List          // *Socket, longest idle first
	addrs    map[netip.Addr]int // sockets, and sessions not yet authenticated, of one address (KeyOf)
	state    map[string]int     // open sockets by state, for the metric
	refusing atomic.Int32
}

// New counts the client port's sockets within o's limits.
func New(o *Options) *Sockets {
	return &Sockets{o: *o, max: o.MaxConnections, maxIdle: max(o.MaxConnections/16, 16),
		maxPending: maxPendingSockets(o.MaxPendingSockets, o.MaxConnections), addrs: make(map[netip.Addr]int)}
}

// Options.MaxPendingSockets' default: MaxConnections over PendingSocketsDivisor, at least
// MinPendingSockets (about 30 MB of sockets before a session, whatever MaxConnections).
const (
	MinPendingSockets     = 1024
	PendingSocketsDivisor = 16
)

// maxPendingSockets is BALLET_MAX_PENDING_SOCKETS, or a sixteenth of BALLET_MAX_CONNECTIONS, at
// least MinPendingSockets: a socket before a session costs about 20–29 KB where an idle session
// costs about 4 KB, so a replica full of sessions and a sixteenth of its places pending holds
// about 1.3 times the memory planned for it, where all places pending held 5 to 7 times.
func maxPendingSockets(set, maxConns int) int {
	if set > 0 {
		return set
	}
	return max(maxConns/PendingSocketsDivisor, MinPendingSockets)
}

// pendingState reports whether a socket in st is not yet a session nor idle: it holds
// net/http's goroutine and buffers.
func pendingState(st sockState) bool { return st == sockNew || st == sockActive }

// StateNames are the state label's values of ballet_gateway_sockets.
func StateNames() []string { return sockStateNames[sockNew:] }

// Socket is one accepted socket. Its fields are guarded by the registry's mutex.
type Socket struct {
	net.Conn
	reg     *Sockets
	addr    netip.Addr // the peer's address (KeyOf), counted until the socket is closed or a session's
	counted bool       // addr is counted
	lent    bool       // an upgrade takes addr's count on at the hijack (lend)
	handed  bool       // the hijack gave addr's count to the upgrade
	state   sockState
	closed  atomic.Bool
	idleAt  *list.Element // in reg.idle while idle
}

// SyscallConn gives the socket's raw connection, for writes that do not wait.
func (c *Socket) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}

// CloseWrite shuts the socket for writing.
func (c *Socket) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Detach lets f replace the socket's connection (the WebSocket's, serving the socket by its
// descriptor); the socket stays counted until it is closed.
func (c *Socket) Detach(f func(net.Conn) (net.Conn, bool)) bool {
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	nc, ok := f(c.Conn)
	if ok {
		c.Conn = nc
	}
	return ok
}

// Close closes the socket and gives its place back, once.
func (c *Socket) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.reg.forget(c)
	}
	return err
}

// Listener counts the sockets ln accepts (BALLET_MAX_CONNECTIONS,
// BALLET_MAX_CONNECTIONS_PER_IP, BALLET_MAX_PENDING_SOCKETS); serve the client port with it and with HTTPServer. A
// socket beyond a limit is answered 503 with Retry-After and closed, except that on a full
// replica the longest idle keep-alive socket is closed to make room first.
func (r *Sockets) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, reg: r}
}

// HTTPServer is the client port's HTTP server for h: the deadlines of the sockets it holds,
// and their accounting (ConnState), with Listener.
func (r *Sockets) HTTPServer(h http.Handler, errLog *log.Logger) *http.Server {
	return &http.Server{Handler: boundBodies(h), ReadHeaderTimeout: requestHeaderTimeout, IdleTimeout: keepAliveIdle,
		MaxHeaderBytes: 64 << 10, ErrorLog: errLog, ConnState: r.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*Socket); ok {
				return context.WithValue(ctx, socketKey{}, sc)
			}
			return ctx
		}}
}

// socketKey is the request context's key of its *socket.
type socketKey struct{}

// SocketOf is the socket r came on, or nil (a server other than HTTPServer).
func SocketOf(r *http.Request) *Socket {
	sc, _ := r.Context().Value(socketKey{}).(*Socket)
	return sc
}

// boundBodies gives every request with a body a deadline for it (bodyGrace; /api/v1/'s
// accessLog sets RESTTimeout instead), and outside /api/v1/, where no route takes a body, has
// the socket closed after the answer: net/http would otherwise wait, without a deadline, for
// the body before reusing the socket, or for the rest of it before the next request.
func boundBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 { // a length, or -1: chunked
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyGrace))
			if !strings.HasPrefix(r.URL.Path, "/api/v1/") {
				w.Header().Set("Connection", "close")
			}
		}
		h.ServeHTTP(w, r)
	})
}

// bufferAtMost sets the kernel's send and receive buffers of c to n bytes (the kernel keeps twice
// that for its own bookkeeping). Left to itself the kernel grows a socket's send buffer to
// net.ipv4.tcp_wmem's maximum (4 MiB on most Linux) for a peer that stops reading, and its
// receive buffer, for a peer that sends faster than the gateway reads, to tcp_rmem's: memory the
// process's budgets do not see but its container is charged for. A peer that keeps up never
// fills them.
func bufferAtMost(c net.Conn, n int) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(n)
		_ = tc.SetReadBuffer(n)
	}
}

type listener struct {
	net.Listener
	reg *Sockets
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc, limit := l.reg.admit(c)
		if sc != nil {
			bufferAtMost(c, l.reg.o.SocketBufferBytes)
			return sc, nil
		}
		l.reg.refuse(c, limit)
	}
}

// admit counts c, or names the limit it is beyond.
func (r *Sockets) admit(c net.Conn) (*Socket, string) {
	sc := &Socket{Conn: c, reg: r}
	peer := peerAddr(c.RemoteAddr())
	trusted := !peer.IsValid() || r.TrustedProxy(peer)
	r.mu.Lock()
	if r.pending >= r.maxPending {
		r.mu.Unlock()
		return nil, LimitPendingSockets
	}
	var evict *Socket
	if !trusted {
		sc.addr = KeyOf(peer)
		if r.addrs[sc.addr] >= r.o.MaxConnectionsPerIP {
			// An idle keep-alive socket of the address's makes room, as on a full replica.
			if evict = r.idleOfLocked(sc.addr); evict == nil {
				r.mu.Unlock()
				return nil, LimitAddrConns
			}
			r.unidleLocked(evict)
			r.uncountLocked(evict)
		}
	}
	if evict == nil && r.open >= r.max {
		front := r.idle.Front()
		if front == nil {
			r.mu.Unlock()
			return nil, LimitConnections
		}
		evict = r.unidleLocked(front.Value.(*Socket))
	}
	if !trusted {
		r.addrs[sc.addr]++
		sc.counted = true
	}
	r.open++
	r.setStateLocked(sc, sockNew)
	r.mu.Unlock()
	if evict != nil {
		r.o.Evicted.Inc()
		_ = evict.Close()
	}
	return sc, ""
}

// idleOfLocked is the longest idle keep-alive socket of addr, or nil.
func (r *Sockets) idleOfLocked(addr netip.Addr) *Socket {
	for e := r.idle.Front(); e != nil; e = e.Next() {
		if sc := e.Value.(*Socket); sc.counted && sc.addr == addr {
			return sc
		}
	}
	return nil
}

// connState follows a socket through net/http (http.Server.ConnState).
func (r *Sockets) connState(c net.Conn, st http.ConnState) {
	sc, ok := c.(*Socket)
	if !ok || sc.closed.Load() {
		return
	}
	var evict *Socket
	r.mu.Lock()
	if sc.closed.Load() {
		r.mu.Unlock()
		return
	}
	switch st {
	case http.StateActive:
		r.unidleLocked(sc)
		r.setStateLocked(sc, sockActive)
	case http.StateIdle:
		r.setStateLocked(sc, sockIdle)
		sc.idleAt = r.idle.PushBack(sc)
		if r.idle.Len() > r.maxIdle {
			evict = r.unidleLocked(r.idle.Front().Value.(*Socket))
		}
	case http.StateHijacked:
		if sc.lent { // the upgrade's session counts the address from here
			sc.counted, sc.lent, sc.handed = false, false, true
		}
		r.uncountLocked(sc)
		r.unidleLocked(sc)
		r.setStateLocked(sc, sockSession)
	}
	r.mu.Unlock()
	if evict != nil {
		r.o.Evicted.Inc()
		_ = evict.Close()
	}
}

// forget gives a closed socket's place back.
func (r *Sockets) forget(sc *Socket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uncountLocked(sc)
	r.unidleLocked(sc)
	r.setStateLocked(sc, sockGone)
	r.open--
}

func (r *Sockets) setStateLocked(sc *Socket, st sockState) {
	if sc.state != sockGone {
		r.o.States.WithLabelValues(sc.state.String()).Dec()
	}
	if pendingState(sc.state) {
		r.pending--
	}
	if pendingState(st) {
		r.pending++
	}
	sc.state = st
	if st != sockGone {
		r.o.States.WithLabelValues(st.String()).Inc()
	}
}

// unidleLocked takes sc off the idle list and returns it.
func (r *Sockets) unidleLocked(sc *Socket) *Socket {
	if sc.idleAt != nil {
		r.idle.Remove(sc.idleAt)
		sc.idleAt = nil
	}
	return sc
}

func (r *Sockets) uncountLocked(sc *Socket) {
	if sc.counted {
		sc.counted = false
		r.releaseAddrLocked(sc.addr)
	}
}

// Lend has sc's count of addr go to the upgrade being served on it at the hijack, so that
// the address is counted once, by the socket then by its session; false when sc does not
// count addr (a trusted proxy's).
func (r *Sockets) Lend(sc *Socket, addr netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sc == nil || !sc.counted || sc.addr != addr {
		return false
	}
	sc.lent = true
	return true
}

// Unlend takes back what Lend lent, once the upgrade is refused: true when the hijack had
// already given the count to the upgrade, which must then release it.
func (r *Sockets) Unlend(sc *Socket) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc.lent = false
	return sc.handed
}

// AcquireAddr counts a /rpc connection of addr (KeyOf) not yet authenticated against
// BALLET_MAX_CONNECTIONS_PER_IP.
func (r *Sockets) AcquireAddr(addr netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs[addr] >= r.o.MaxConnectionsPerIP {
		return false
	}
	r.addrs[addr]++
	return true
}

// ReleaseAddr gives back a count AcquireAddr took, or one the hijack handed over.
func (r *Sockets) ReleaseAddr(addr netip.Addr) {
	r.mu.Lock()
	r.releaseAddrLocked(addr)
	r.mu.Unlock()
}

func (r *Sockets) releaseAddrLocked(addr netip.Addr) {
	if r.addrs[addr] <= 1 {
		delete(r.addrs, addr)
	} else {
		r.addrs[addr]--
	}
}

// refusal is the answer to a socket refused at accept: nothing of its request is read.
var refusal = func() []byte {
	const body = "the gateway is at its connection limit; try again later\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + strconv.Itoa(int(RetryAfter/time.Second)) +
		"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) +
		"\r\nConnection: close\r\n\r\n" + body)
}()

// refuse answers a socket beyond limit 503 and closes it, within wsnet.CloseGrace: it reads the
// request's header first (an answer before the request is not one to an HTTP client).
func (r *Sockets) refuse(c net.Conn, limit string) {
	r.o.OnRefused(limit)
	if r.refusing.Add(1) > maxRefusing {
		r.refusing.Add(-1)
		_ = c.Close()
		return
	}
	go func() {
		defer r.refusing.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(wsnet.CloseGrace))
		if _, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, 64<<10))); err != nil {
			return
		}
		_, _ = c.Write(refusal)
		// Read on before closing, so that anything more the client sent does not turn the
		// close into a reset that loses the answer.
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
			_, _ = io.CopyN(io.Discard, c, 64<<10)
		}
	}()
}
