// Sockets on the client port: every socket counts against BALLET_MAX_CONNECTIONS from accept
// to close, whatever it carries; the sockets of one address are bounded by
// BALLET_MAX_CONNECTIONS_PER_IP from accept until a session authenticates on one (the count
// passes from the socket to its /rpc session at the upgrade); the sockets that are not yet a
// session nor idle (new, and active: a request being read or served), which cost several times
// an idle session, are bounded by BALLET_MAX_PENDING_SOCKETS across all addresses; and no socket
// is held without a deadline.

package gateway

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

// sockets counts the client port's sockets.
type sockets struct {
	srv        *Server
	max        int // BALLET_MAX_CONNECTIONS
	maxIdle    int // idle keep-alive sockets at most: the longest idle is closed past it
	maxPending int // BALLET_MAX_PENDING_SOCKETS: new sockets are refused while this many are pending

	mu       sync.Mutex
	open     int
	pending  int             // sockets new or active (pendingState)
	idle     list.List       // *socket, longest idle first
	addrs    map[addrKey]int // sockets, and sessions not yet authenticated, of one address
	state    map[string]int  // open sockets by state, for the metric
	refusing atomic.Int32
}

func newSockets(srv *Server) *sockets {
	return &sockets{srv: srv, max: srv.cfg.MaxConnections, maxIdle: max(srv.cfg.MaxConnections/16, 16),
		maxPending: maxPendingSockets(srv.cfg), addrs: make(map[addrKey]int)}
}

// Config.MaxPendingSockets' default: MaxConnections over PendingSocketsDivisor, at least
// MinPendingSockets (about 30 MB of sockets before a session, whatever MaxConnections).
const (
	MinPendingSockets     = 1024
	PendingSocketsDivisor = 16
)

// maxPendingSockets is BALLET_MAX_PENDING_SOCKETS, or a sixteenth of BALLET_MAX_CONNECTIONS, at
// least MinPendingSockets: a socket before a session costs about 20–29 KB where an idle session
// costs about 4 KB, so a replica full of sessions and a sixteenth of its places pending holds
// about 1.3 times the memory planned for it, where all places pending held 5 to 7 times.
func maxPendingSockets(c Config) int {
	if c.MaxPendingSockets > 0 {
		return c.MaxPendingSockets
	}
	return max(c.MaxConnections/PendingSocketsDivisor, MinPendingSockets)
}

// pendingState reports whether a socket in st is not yet a session nor idle: it holds
// net/http's goroutine and buffers.
func pendingState(st sockState) bool { return st == sockNew || st == sockActive }

// addrKey is a client address as the per-address limit counts it: an IPv4 address, or an
// IPv6 address's /64 (one subscriber's network).
type addrKey netip.Addr

func keyOf(a netip.Addr) addrKey {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return addrKey(p.Addr())
	}
	return addrKey(a)
}

func (k addrKey) String() string { return netip.Addr(k).String() }

// IsValid reports whether k is an address (the zero addrKey is not).
func (k addrKey) IsValid() bool { return netip.Addr(k).IsValid() }

// socket is one accepted socket. Its fields are guarded by the registry's mutex.
type socket struct {
	net.Conn
	reg     *sockets
	addr    addrKey // the peer's address, counted until the socket is closed or a session's
	counted bool    // addr is counted
	lent    bool    // an upgrade takes addr's count on at the hijack (lend)
	handed  bool    // the hijack gave addr's count to the upgrade
	state   sockState
	closed  atomic.Bool
	idleAt  *list.Element // in reg.idle while idle
}

// SyscallConn gives the socket's raw connection, for writes that do not wait.
func (c *socket) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}

// CloseWrite shuts the socket for writing.
func (c *socket) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Detach lets f replace the socket's connection (the WebSocket's, serving the socket by its
// descriptor); the socket stays counted until it is closed.
func (c *socket) Detach(f func(net.Conn) (net.Conn, bool)) bool {
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	nc, ok := f(c.Conn)
	if ok {
		c.Conn = nc
	}
	return ok
}

// Close closes the socket and gives its place back, once.
func (c *socket) Close() error {
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
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, reg: s.sockets}
}

// HTTPServer is the client port's HTTP server for h: the deadlines of the sockets it holds,
// and their accounting (ConnState), with Listener.
func (s *Server) HTTPServer(h http.Handler, errLog *log.Logger) *http.Server {
	return &http.Server{Handler: boundBodies(h), ReadHeaderTimeout: requestHeaderTimeout, IdleTimeout: keepAliveIdle,
		MaxHeaderBytes: 64 << 10, ErrorLog: errLog, ConnState: s.sockets.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*socket); ok {
				return context.WithValue(ctx, socketKey{}, sc)
			}
			return ctx
		}}
}

// socketKey is the request context's key of its *socket.
type socketKey struct{}

// socketOf is the socket r came on, or nil (a server other than HTTPServer).
func socketOf(r *http.Request) *socket {
	sc, _ := r.Context().Value(socketKey{}).(*socket)
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
	reg *sockets
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc, limit := l.reg.admit(c)
		if sc != nil {
			bufferAtMost(c, l.reg.srv.cfg.SocketBufferBytes)
			return sc, nil
		}
		l.reg.refuse(c, limit)
	}
}

// admit counts c, or names the limit it is beyond.
func (r *sockets) admit(c net.Conn) (*socket, string) {
	sc := &socket{Conn: c, reg: r}
	peer := peerAddr(c.RemoteAddr())
	trusted := !peer.IsValid() || r.srv.trustedProxy(peer)
	r.mu.Lock()
	if r.pending >= r.maxPending {
		r.mu.Unlock()
		return nil, limitPendingSockets
	}
	var evict *socket
	if !trusted {
		sc.addr = keyOf(peer)
		if r.addrs[sc.addr] >= r.srv.cfg.MaxConnectionsPerIP {
			// An idle keep-alive socket of the address's makes room, as on a full replica.
			if evict = r.idleOfLocked(sc.addr); evict == nil {
				r.mu.Unlock()
				return nil, limitAddrConns
			}
			r.unidleLocked(evict)
			r.uncountLocked(evict)
		}
	}
	if evict == nil && r.open >= r.max {
		front := r.idle.Front()
		if front == nil {
			r.mu.Unlock()
			return nil, limitConnections
		}
		evict = r.unidleLocked(front.Value.(*socket))
	}
	if !trusted {
		r.addrs[sc.addr]++
		sc.counted = true
	}
	r.open++
	r.setStateLocked(sc, sockNew)
	r.mu.Unlock()
	if evict != nil {
		r.srv.metrics.SocketsEvicted.Inc()
		_ = evict.Close()
	}
	return sc, ""
}

// idleOfLocked is the longest idle keep-alive socket of addr, or nil.
func (r *sockets) idleOfLocked(addr addrKey) *socket {
	for e := r.idle.Front(); e != nil; e = e.Next() {
		if sc := e.Value.(*socket); sc.counted && sc.addr == addr {
			return sc
		}
	}
	return nil
}

// connState follows a socket through net/http (http.Server.ConnState).
func (r *sockets) connState(c net.Conn, st http.ConnState) {
	sc, ok := c.(*socket)
	if !ok || sc.closed.Load() {
		return
	}
	var evict *socket
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
			evict = r.unidleLocked(r.idle.Front().Value.(*socket))
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
		r.srv.metrics.SocketsEvicted.Inc()
		_ = evict.Close()
	}
}

// forget gives a closed socket's place back.
func (r *sockets) forget(sc *socket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uncountLocked(sc)
	r.unidleLocked(sc)
	r.setStateLocked(sc, sockGone)
	r.open--
}

func (r *sockets) setStateLocked(sc *socket, st sockState) {
	if sc.state != sockGone {
		r.srv.metrics.Sockets.WithLabelValues(sc.state.String()).Dec()
	}
	if pendingState(sc.state) {
		r.pending--
	}
	if pendingState(st) {
		r.pending++
	}
	sc.state = st
	if st != sockGone {
		r.srv.metrics.Sockets.WithLabelValues(st.String()).Inc()
	}
}

// unidleLocked takes sc off the idle list and returns it.
func (r *sockets) unidleLocked(sc *socket) *socket {
	if sc.idleAt != nil {
		r.idle.Remove(sc.idleAt)
		sc.idleAt = nil
	}
	return sc
}

func (r *sockets) uncountLocked(sc *socket) {
	if sc.counted {
		sc.counted = false
		r.releaseAddrLocked(sc.addr)
	}
}

// lend has sc's count of addr go to the upgrade being served on it at the hijack, so that
// the address is counted once, by the socket then by its session; false when sc does not
// count addr (a trusted proxy's).
func (r *sockets) lend(sc *socket, addr addrKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sc == nil || !sc.counted || sc.addr != addr {
		return false
	}
	sc.lent = true
	return true
}

// unlend takes back what lend lent, once the upgrade is refused: true when the hijack had
// already given the count to the upgrade, which must then release it.
func (r *sockets) unlend(sc *socket) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc.lent = false
	return sc.handed
}

// acquireAddr counts a /rpc connection of addr not yet authenticated against
// BALLET_MAX_CONNECTIONS_PER_IP.
func (r *sockets) acquireAddr(addr addrKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs[addr] >= r.srv.cfg.MaxConnectionsPerIP {
		return false
	}
	r.addrs[addr]++
	return true
}

func (r *sockets) releaseAddr(addr addrKey) {
	r.mu.Lock()
	r.releaseAddrLocked(addr)
	r.mu.Unlock()
}

func (r *sockets) releaseAddrLocked(addr addrKey) {
	if r.addrs[addr] <= 1 {
		delete(r.addrs, addr)
	} else {
		r.addrs[addr]--
	}
}

// refusal is the answer to a socket refused at accept: nothing of its request is read.
var refusal = func() []byte {
	const body = "the gateway is at its connection limit; try again later\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + strconv.Itoa(int(overloadRetryAfter/time.Second)) +
		"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) +
		"\r\nConnection: close\r\n\r\n" + body)
}()

// refuse answers a socket beyond limit 503 and closes it, within wsnet.CloseGrace: it reads the
// request's header first (an answer before the request is not one to an HTTP client).
func (r *sockets) refuse(c net.Conn, limit string) {
	r.srv.metrics.LimitRejections.WithLabelValues(limit).Inc()
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

// peerAddr is the IP address of a socket's peer, or the zero Addr.
func peerAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (s *Server) trustedProxy(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address a request comes from: its socket's peer, unless that peer is a
// trusted proxy (BALLET_TRUSTED_PROXIES); then the right-most X-Forwarded-For entry that is
// not a trusted proxy (the left-most if all are). An entry that is not an address ends the
// walk at the last trusted hop.
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	peer := netip.Addr{}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer = ap.Addr().Unmap()
	}
	if !peer.IsValid() || !s.trustedProxy(peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return client
		}
		client = a
		if !s.trustedProxy(a) {
			return a
		}
	}
	return client
}

// parseHop parses one X-Forwarded-For entry: an address, with a port or in brackets.
func parseHop(h string) (netip.Addr, bool) {
	h = strings.TrimSpace(h)
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}
