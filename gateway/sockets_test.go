package gateway_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// upgradeRequest is a JSON /rpc upgrade request, with extra header lines.
func upgradeRequest(host, extra string) string {
	return "GET /rpc HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ballet.v1.json\r\n" +
		extra + "\r\n"
}

// hostile is a raw socket of an attacker's.
type hostile struct {
	c  net.Conn
	br *bufio.Reader
}

func hostileDial(t *testing.T, env *gatewaytest.Env) *hostile {
	t.Helper()
	u, _ := url.Parse(env.URL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &hostile{c: c, br: bufio.NewReader(c)}
}

// upgrade sends an upgrade request and reads the answer's status.
func (h *hostile) upgrade(t *testing.T, extra string) *http.Response {
	t.Helper()
	u := h.c.RemoteAddr().String()
	if _, err := h.c.Write([]byte(upgradeRequest(u, extra))); err != nil {
		t.Fatal(err)
	}
	_ = h.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	_ = h.c.SetReadDeadline(time.Time{})
	return resp
}

// dribble sends b every interval until stop is closed or a write fails.
func (h *hostile) dribble(stop <-chan struct{}, every time.Duration, b byte) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := h.c.Write([]byte{b}); err != nil {
				return
			}
		}
	}
}

// closeFrame reads frames until the server's close frame and returns its code.
func (h *hostile) closeFrame(t *testing.T, within time.Duration) websocket.StatusCode {
	t.Helper()
	_ = h.c.SetReadDeadline(time.Now().Add(within))
	defer h.c.SetReadDeadline(time.Time{})
	for {
		var hd [2]byte
		if _, err := io.ReadFull(h.br, hd[:]); err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		n := int(hd[1] & 0x7f)
		switch n {
		case 126:
			var ext [2]byte
			_, _ = io.ReadFull(h.br, ext[:])
			n = int(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			_, _ = io.ReadFull(h.br, ext[:])
			n = int(binary.BigEndian.Uint64(ext[:]))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(h.br, p); err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		if hd[0]&0x0f == 8 {
			if len(p) < 2 {
				return websocket.StatusNoStatusRcvd
			}
			return websocket.StatusCode(binary.BigEndian.Uint16(p))
		}
	}
}

// closedWithin reports whether the server closes the socket within d: a read ends with EOF
// or a reset rather than the deadline.
func (h *hostile) closedWithin(d time.Duration) error {
	_ = h.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, h.br)
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return fmt.Errorf("still open after %v", d)
}

// frameHeader is the header of a masked client frame declaring n payload bytes.
func frameHeader(opcode byte, fin bool, n uint64) []byte {
	b := []byte{opcode}
	if fin {
		b[0] |= 0x80
	}
	switch {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, n)
	}
	return append(b, 0x12, 0x34, 0x56, 0x78)
}

// hold opens n sockets at once with open, each left in the state the attack wants, then,
// while they are held, has a well-behaved client connect: it must get in within bound, and
// every attacking socket must be closed by the server within bound.
func hold(t *testing.T, env *gatewaytest.Env, n int, bound time.Duration, open func(i int) *hostile) {
	t.Helper()
	hs := make([]*hostile, n)
	var wg sync.WaitGroup
	for i := range hs {
		wg.Go(func() { hs[i] = open(i) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	errs := make([]error, n)
	for i, h := range hs {
		wg.Go(func() { errs[i] = h.closedWithin(bound) })
	}
	t.Logf("while %d sockets were held, a well-behaved client got in after %v", n, legitimate(t, env, bound))
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
	}
	waitSockets(t, env, 0)
}

// legitimate connects and authenticates a well-behaved client, retrying while the replica
// answers 503, and returns how long it took.
func legitimate(t *testing.T, env *gatewaytest.Env, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ws, err := dialRaw(t, env.URL, []string{codec.JSON.Name()}, nil)
		if err == nil {
			k := newClient(t, ws, codec.JSON)
			k.mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, nil)
			k.mustCall("system.ping", nil, nil)
			ws.CloseNow()
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("a well-behaved client could not connect within %v: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Every socket state has a deadline: sockets held by a peer that stops sending, in each
// state, fill a replica of as many places, and each loses its place within its state's bound;
// a well-behaved client then gets in. (The bounds: the auth timeout, 1 s here, then the 1 s
// flush and the 2 s close grace; 5 s for a request's header; idle keep-alive sockets make
// room at once.) The silent sockets, 400 of them, run first and alone, so that what they cost
// is theirs; then the other states wait out their deadlines at once, 100 sockets each, each on
// a replica of its own: fewer sockets at once than the silent ones, so that a well-behaved
// client still authenticates within the auth timeout on a loaded machine.
func TestEverySocketStateHasADeadline(t *testing.T) {
	start := func(t *testing.T, n int) *gatewaytest.Env {
		return gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
			MaxConnections: n, MaxConnectionsPerIP: 100 * n, AuthTimeout: time.Second, DrainWindow: 10 * time.Millisecond,
		}})
	}
	// The deadline of the state, and time for a loaded machine.
	const slack = 10 * time.Second
	closeBound := time.Second + time.Second + 2*time.Second + slack

	t.Run("silent sockets", func(t *testing.T) {
		const n = 400
		env := start(t, n)
		var full *http.Response
		before := memInUse()
		hold(t, env, n, 5*time.Second+slack, func(i int) *hostile {
			h := hostileDial(t, env)
			if i == n-1 {
				waitSockets(t, env, n)
				// What a socket that sent nothing costs, the test's own end of it included.
				t.Logf("%d silent sockets: %.1f KB each (heap and stacks, both ends)", n,
					float64(memInUse()-before)/float64(n)/1000)
				// The replica is full: the next socket is answered 503 and closed.
				extra := hostileDial(t, env)
				full = extra.upgrade(t, "")
				if err := extra.closedWithin(slack); err != nil {
					t.Errorf("the refused socket: %v", err)
				}
			}
			return h
		})
		if full == nil || full.StatusCode != http.StatusServiceUnavailable || full.Header.Get("Retry-After") == "" {
			t.Fatalf("a socket beyond the limit: %+v, want 503 with Retry-After", full)
		}
	})

	const n = 100
	together(t, subtest{"a frame header after the server's close frame", func(t *testing.T) {
		env := start(t, n)
		hold(t, env, n, closeBound, func(i int) *hostile {
			h := hostileDial(t, env)
			if resp := h.upgrade(t, ""); resp.StatusCode != http.StatusSwitchingProtocols {
				t.Errorf("upgrade %d: %s", i, resp.Status)
				return h
			}
			if i%2 == 1 { // a bad token: 4001 at once
				_, _ = h.c.Write(textFrame(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"bad"}}`))
			} // else the auth timeout: 4001 after a second
			if code := h.closeFrame(t, 30*time.Second); code != gateway.StatusUnauthenticated {
				t.Errorf("socket %d: close %d, want 4001", i, code)
			}
			_, _ = h.c.Write(frameHeader(2, true, 8<<10)) // 8 KiB declared, none sent
			return h
		})
	}}, subtest{"a payload dribbled past the auth timeout", func(t *testing.T) {
		env := start(t, n)
		stop := make(chan struct{})
		var dribblers sync.WaitGroup
		defer func() { close(stop); dribblers.Wait() }()
		hold(t, env, n, closeBound, func(i int) *hostile {
			h := hostileDial(t, env)
			if resp := h.upgrade(t, ""); resp.StatusCode != http.StatusSwitchingProtocols {
				t.Errorf("upgrade %d: %s", i, resp.Status)
				return h
			}
			_, _ = h.c.Write(frameHeader(1, true, 8<<10))
			dribblers.Go(func() { h.dribble(stop, 200*time.Millisecond, ' ') })
			return h
		})
	}}, subtest{"a request header sent a byte a second", func(t *testing.T) {
		env := start(t, n)
		stop := make(chan struct{})
		var dribblers sync.WaitGroup
		defer func() { close(stop); dribblers.Wait() }()
		hold(t, env, n, 5*time.Second+slack, func(i int) *hostile {
			h := hostileDial(t, env)
			_, _ = h.c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
			dribblers.Go(func() { h.dribble(stop, time.Second, 'X') })
			return h
		})
	}}, subtest{"idle keep-alive sockets", func(t *testing.T) {
		env := start(t, n)
		hs := make([]*hostile, n)
		for i := range hs {
			h := hostileDial(t, env)
			if _, err := h.c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(h.br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("healthz %d: %v %v", i, resp, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			hs[i] = h
		}
		// Idle sockets are few: past BALLET_MAX_CONNECTIONS/16 (at least 16) the longest idle
		// is closed. And a full replica closes one to let a new client in at once.
		idle := func() int {
			v, _ := labeledMetric(t, env.Server, "ballet_gateway_sockets", "state", "idle")
			return int(v)
		}
		eventually(t, "idle sockets to be bounded", func() bool { return idle() <= max(n/16, 16) })
		took := legitimate(t, env, slack)
		evicted := metricValue(t, env.Server, "ballet_gateway_sockets_evicted_total")
		t.Logf("%d idle, %v evicted; a well-behaved client got in after %v", idle(), evicted, took)
		if got := evicted; got < float64(n-max(n/16, 16)) {
			t.Fatalf("%v idle sockets evicted, want at least %d", got, n-max(n/16, 16))
		}
	}})
}

// memInUse is the heap and goroutine stacks in use, after a collection.
func memInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

func waitSockets(t *testing.T, env *gatewaytest.Env, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for gateway.Sockets(env.Server) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets open, want %d", gateway.Sockets(env.Server), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BALLET_MAX_CONNECTIONS_PER_IP bounds the sockets and /rpc connections of one address that
// have not authenticated; authenticating gives the place back. A refused handshake is
// answered 503 with Retry-After and its socket closed.
func TestConnectionsPerAddress(t *testing.T) {
	const max = 8
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
		MaxConnectionsPerIP: max, AuthTimeout: time.Minute, DrainWindow: 10 * time.Millisecond,
	}})
	var held []*hostile
	for i := range max {
		h := hostileDial(t, env)
		if i%2 == 0 { // half upgraded, half silent sockets
			if resp := h.upgrade(t, ""); resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("upgrade %d: %s", i, resp.Status)
			}
		}
		held = append(held, h)
	}
	waitSockets(t, env, max)
	over := hostileDial(t, env)
	resp := over.upgrade(t, "")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("connection %d of one address: %s, want 503 with Retry-After", max+1, resp.Status)
	}
	if err := over.closedWithin(10 * time.Second); err != nil {
		t.Fatalf("the refused socket: %v", err)
	}
	if got := limitRejections(t, env.Server, "connections_per_ip"); got < 1 {
		t.Fatalf("connections_per_ip rejections %v", got)
	}
	// One of them authenticates: its place is free.
	_, _ = held[0].c.Write(textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, "alice"))))
	r := &rawClient{t: t, c: held[0].c, br: held[0].br}
	if p := r.want(1); strings.Contains(string(p), `"error"`) {
		t.Fatalf("auth: %s", p)
	}
	next := hostileDial(t, env)
	if resp := next.upgrade(t, ""); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("after one authenticated: %s", resp.Status)
	}
}

// Behind trusted proxies (BALLET_TRUSTED_PROXIES), the address counted is the right-most
// X-Forwarded-For entry that is not a trusted proxy, and the proxies' own sockets are not
// counted per address.
func TestConnectionsPerAddressBehindProxies(t *testing.T) {
	const max = 4
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
		MaxConnectionsPerIP: max, AuthTimeout: time.Minute, DrainWindow: 10 * time.Millisecond,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16")},
	}})
	upgrade := func(xff string) int {
		h := hostileDial(t, env)
		return h.upgrade(t, "X-Forwarded-For: "+xff+"\r\n").StatusCode
	}
	for i := range max {
		if code := upgrade("198.51.100.1"); code != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade %d: %d", i, code)
		}
	}
	for _, tc := range []struct {
		xff  string
		want int
	}{
		{"198.51.100.1", http.StatusServiceUnavailable},
		{"198.51.100.1, 10.1.2.3", http.StatusServiceUnavailable}, // a trusted hop on the right
		{"198.51.100.2", http.StatusSwitchingProtocols},
		{"198.51.100.1, 203.0.113.9", http.StatusSwitchingProtocols}, // the right-most untrusted entry counts
	} {
		if code := upgrade(tc.xff); code != tc.want {
			t.Errorf("X-Forwarded-For %q: %d, want %d", tc.xff, code, tc.want)
		}
	}
	// Plain sockets of the proxy itself are not counted per address.
	for range 3 * max {
		hostileDial(t, env)
	}
	if code := upgrade("198.51.100.3"); code != http.StatusSwitchingProtocols {
		t.Fatalf("with the proxy's idle sockets open: %d", code)
	}
}

// A frame is refused at its header (RFC 6455): one declaring more than the read limit closes
// 1009 before its payload is sent, a continuation that takes its message past the limit
// too, and an unmasked client frame closes 1002; before auth and after it.
func TestFramesRefusedAtTheirHeader(t *testing.T) {
	const limit = 64 << 10
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{ReadLimit: limit, DrainWindow: 10 * time.Millisecond}})
	// Each case waits out the close grace of a peer that sends no close frame back: in
	// parallel, all of them ended before the closes are counted. (A close is counted once the
	// session has closed its socket, which its peer may see first.)
	t.Run("cases", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			login bool
			send  []byte
			want  websocket.StatusCode
		}{
			{"a header beyond the limit", false, frameHeader(1, true, limit+1), websocket.StatusMessageTooBig},
			{"a 64-bit length", true, frameHeader(2, true, 1<<40), websocket.StatusMessageTooBig},
			{"a continuation past the limit", true, append(fragment(1, limit/2), frameHeader(0, true, limit/2+1)...), websocket.StatusMessageTooBig},
			{"unmasked", false, []byte{0x81, 0x02, '{', '}'}, websocket.StatusProtocolError},
			{"unmasked after auth", true, []byte{0x81, 0x02, '{', '}'}, websocket.StatusProtocolError},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := hostileDial(t, env)
				if resp := h.upgrade(t, ""); resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("upgrade: %s", resp.Status)
				}
				if tc.login {
					_, _ = h.c.Write(textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, "alice"))))
					(&rawClient{t: t, c: h.c, br: h.br}).want(1)
				}
				if _, err := h.c.Write(tc.send); err != nil {
					t.Fatal(err)
				}
				if code := h.closeFrame(t, 20*time.Second); code != tc.want {
					t.Fatalf("close %d, want %d", code, tc.want)
				}
				if err := h.closedWithin(20 * time.Second); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for closesWithCode(t, env.Server, "1009") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("closes with 1009: %v, want 3", closesWithCode(t, env.Server, "1009"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fragment is a masked first frame of a text message, not final, with n bytes of payload.
func fragment(opcode byte, n int) []byte {
	f := clientFrame(opcode, []byte(strings.Repeat(" ", n)))
	f[0] &^= 0x80
	return f
}

// One address with no token, re-opening silent sockets as fast as they are closed, holds at
// most BALLET_MAX_CONNECTIONS_PER_IP places: clients from other addresses all get in.
func TestOneAddressCannotFillAReplica(t *testing.T) {
	const places, perAddr = 100, 16
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
		MaxConnections: places, MaxConnectionsPerIP: perAddr, AuthTimeout: time.Second, DrainWindow: 10 * time.Millisecond,
	}})
	u, _ := url.Parse(env.URL)
	var attackers sync.WaitGroup
	var refused, opened atomic.Int64
	// The attacker's open sockets; nil once the test is over, when the attacker closes them
	// rather than wait out the server's deadline.
	var mu sync.Mutex
	held := map[net.Conn]bool{}
	for range places + 20 { // more than every place, from 127.0.0.1
		attackers.Go(func() {
			for {
				mu.Lock()
				over := held == nil
				mu.Unlock()
				if over {
					return
				}
				c, err := net.Dial("tcp", u.Host)
				if err != nil {
					continue
				}
				mu.Lock()
				if held == nil {
					mu.Unlock()
					c.Close()
					return
				}
				held[c] = true
				mu.Unlock()
				opened.Add(1)
				// Silent until the server closes it, by deadline or at once as refused.
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				if n, _ := c.Read(make([]byte, 1)); n > 0 {
					refused.Add(1)
				}
				mu.Lock()
				delete(held, c)
				mu.Unlock()
				c.Close()
			}
		})
	}
	defer func() {
		mu.Lock()
		for c := range held {
			c.Close()
		}
		held = nil
		mu.Unlock()
		attackers.Wait()
	}()
	waitSockets(t, env, perAddr)
	// Clients from another address of the loopback range.
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ws, _, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{codec.NameJSON}})
		cancel()
		if err != nil {
			t.Fatalf("client %d from another address: %v", i, err)
		}
		k := newClient(t, ws, codec.JSON)
		k.mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, nil)
		ws.CloseNow()
	}
	if n := gateway.Sockets(env.Server); n > perAddr+1 {
		t.Fatalf("%d sockets open, at most %d of the attacker's", n, perAddr)
	}
	t.Logf("the attacker opened %d sockets, %d of them refused at once", opened.Load(), refused.Load())
}
