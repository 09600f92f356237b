package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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

// bodyAttack is what one attacking socket sends: its requests, then a byte of drip at every
// tick until the server closes it (none when drip is ""). quick is an attack whose socket the
// server closes at once (its first request is whole and answered with Connection: close), so
// that the address's limit refuses its sockets only when they are opened faster than closed.
type bodyAttack struct {
	name  string
	send  func(host string) string
	drip  string
	quick bool
}

var bodyAttacks = []bodyAttack{
	{"healthz with a body promised", func(string) string {
		return "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
	}, "", false},
	{"an unknown path with a body promised", func(string) string {
		return "GET /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
	}, "", false},
	{"POST /rpc with a body promised", func(string) string {
		return "POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
	}, "", false},
	{"an upgrade with a body promised", func(host string) string {
		return upgradeRequest(host, "Content-Length: 100\r\n")
	}, "", false},
	{"an upgrade with a chunked body", func(host string) string {
		return upgradeRequest(host, "Transfer-Encoding: chunked\r\n")
	}, "1\r\nx\r\n", false},
	{"a chunked body that never ends", func(string) string {
		return "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	}, "1\r\nx\r\n", false},
	{"a body dribbled a byte at a time", func(string) string {
		return "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
	}, "x", false},
	{"a request pipelined after a body", func(string) string {
		return "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
			"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
	}, "", true},
	{"a keep-alive socket reused", func(string) string {
		return "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
	}, "", false},
}

// A request whose body does not come, on any route of the client port, holds its socket for
// at most the body grace, counted against its address meanwhile: 320 such sockets opened one
// after the other from one address (each attack from its own) are all closed within the bound, the per-address limit
// refuses the surplus, and a client from another address connects while they are held.
func TestBodiesNeverSentCloseTheirSockets(t *testing.T) {
	const n, perAddr = 320, 64
	// The body grace (2 s) after a header sent at once, and time for a loaded machine.
	const bound = 2*time.Second + 10*time.Second
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
		MaxConnections: 4 * n * len(bodyAttacks), MaxConnectionsPerIP: perAddr, DrainWindow: 10 * time.Millisecond,
	}})
	u, _ := url.Parse(env.URL)
	// Every socket of the replica, attackers' and clients', while the attacks run: each
	// address holds at most its limit, and each client one at a time.
	stop := make(chan struct{})
	var peak atomic.Int64
	var watch sync.WaitGroup
	watch.Go(func() { sample(stop, &peak, func() int { return gateway.Sockets(env.Server) }) })
	// The attacks at once, each from its own address: each spends its time waiting out the
	// body grace.
	t.Run("attacks", func(t *testing.T) {
		attacks := make([]subtest, len(bodyAttacks))
		for i, a := range bodyAttacks {
			addr := fmt.Sprintf("127.0.0.%d", 10+i)
			attacks[i] = subtest{a.name, func(t *testing.T) { bodyFlood(t, env, u.Host, addr, n, perAddr, bound, a) }}
		}
		together(t, attacks...)
	})
	close(stop)
	watch.Wait()
	if most := 2 * perAddr * len(bodyAttacks); peak.Load() > int64(most) {
		t.Fatalf("%d sockets open at once, want at most %d: %d per attacking address and the clients'", peak.Load(), most, perAddr)
	}
	waitSockets(t, env, 0)
	if got := gateway.AddrSockets(env.Server, "127.0.0.10"); got != 0 {
		t.Fatalf("127.0.0.10 still counts %d sockets", got)
	}
}

func bodyFlood(t *testing.T, env *gatewaytest.Env, host, addr string, n, perAddr int, bound time.Duration, a bodyAttack) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	stop := make(chan struct{})
	var peak atomic.Int64
	var watch sync.WaitGroup
	watch.Go(func() { sample(stop, &peak, func() int { return gateway.AddrSockets(env.Server, addr) }) })
	var wg sync.WaitGroup
	var refused, answered atomic.Int64
	errs := make([]error, n)
	// One socket after the other, each sending its request before the next is opened: past the
	// address's limit, its sockets that have sent a request are still counted.
	for i := range n {
		c, err := d.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Write([]byte(a.send(c.RemoteAddr().String()))); err != nil {
			c.Close() // refused and closed already
			continue
		}
		wg.Go(func() {
			defer c.Close()
			done := make(chan struct{})
			defer close(done)
			if a.drip != "" {
				go func() {
					tick := time.NewTicker(300 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-done:
							return
						case <-tick.C:
							if _, err := c.Write([]byte(a.drip)); err != nil {
								return
							}
						}
					}
				}()
			}
			_ = c.SetReadDeadline(start.Add(bound))
			br := bufio.NewReader(c)
			if line, err := br.ReadString('\n'); err == nil {
				answered.Add(1)
				if strings.Contains(line, " 503 ") {
					refused.Add(1)
				}
			}
			if _, err := io.Copy(io.Discard, br); err != nil && isTimeout(err) {
				errs[i] = fmt.Errorf("still open after %v", bound)
			}
		})
	}
	// A client from another address gets in while the sockets are held.
	took := legitimateFrom(t, env, "127.0.0.2", bound)
	wg.Wait()
	close(stop)
	watch.Wait()
	held := 0
	for _, err := range errs {
		if err != nil {
			held++
		}
	}
	t.Logf("%d sockets from %s: %d answered, %d refused 503, %d held past %v; at most %d counted; "+
		"a client from another address got in after %v", n, addr, answered.Load(), refused.Load(), held, bound, peak.Load(), took)
	if held > 0 {
		t.Fatalf("%d of %d sockets were still open after %v", held, n, bound)
	}
	if p := peak.Load(); p > int64(perAddr) || p == 0 {
		t.Fatalf("the address counted at most %d sockets, want 1 to %d", p, perAddr)
	}
	if refused.Load() == 0 && !a.quick {
		t.Fatalf("none of %d sockets was refused by the limit of %d per address", n, perAddr)
	}
}

// sample keeps the highest of f's values in peak until stop is closed.
func sample(stop <-chan struct{}, peak *atomic.Int64, f func() int) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if c := int64(f()); c > peak.Load() {
			peak.Store(c)
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// legitimateFrom is legitimate, from the loopback address addr.
func legitimateFrom(t *testing.T, env *gatewaytest.Env, addr string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer hc.CloseIdleConnections()
	for {
		k, err := dialFrom(t, env, hc)
		if err == nil {
			k.mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, nil)
			k.mustCall("system.ping", nil, nil)
			k.hangUp()
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("a client from %s could not connect within %v: %v", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialFrom opens a JSON /rpc connection with hc.
func dialFrom(t *testing.T, env *gatewaytest.Env, hc *http.Client) (*wsClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{codec.NameJSON}})
	if err != nil {
		return nil, err
	}
	return newClient(t, ws, codec.JSON), nil
}
