package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// Shutdown while hundreds of connections are opening: the sessions the
// server has taken but not started yet end too, without a crash, and every
// client that got in hears 1001.
func TestShutdownWhileConnectionsOpen(t *testing.T) {
	const rounds, conns = 20, 200
	// More Ps than cores: the OS preempts the server's threads anywhere,
	// also between taking a session and starting it.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(32, 8*runtime.NumCPU())))
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{DrainWindow: time.Nanosecond}})
			// Every handshake waits at its last byte until the gate opens,
			// so that they all reach the server together with Shutdown.
			gate := make(chan struct{})
			var held atomic.Int32
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &gatedConn{Conn: c, gate: gate, held: &held}, nil
			}}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			var wg sync.WaitGroup
			errs := make(chan error, conns)
			for i := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					ws, _, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{
						HTTPClient: hc, Subprotocols: []string{codecs[i%2].Name()},
					})
					if err != nil {
						return // refused: the gateway was draining already
					}
					defer ws.CloseNow()
					_, _, err = ws.Read(ctx)
					if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
						errs <- fmt.Errorf("client %d: close %d (%v), want 1001", i, code, err)
					}
				}()
			}
			for held.Load() < conns {
				time.Sleep(100 * time.Microsecond)
			}
			close(gate)
			for env.Server.Sessions() == 0 {
				runtime.Gosched()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := env.Server.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n := env.Server.Sessions(); n != 0 {
				t.Errorf("%d sessions left after Shutdown", n)
			}
			if n := metricValue(t, env.Server, "ballet_gateway_connections"); n != 0 {
				t.Errorf("connections gauge %v after Shutdown", n)
			}
		})
	}
}

// gatedConn holds back the last byte of the first write (an HTTP request)
// until gate is closed.
type gatedConn struct {
	net.Conn
	gate <-chan struct{}
	held *atomic.Int32
	once sync.Once
}

func (c *gatedConn) Write(p []byte) (int, error) {
	first := false
	c.once.Do(func() { first = true })
	if !first || len(p) < 2 {
		return c.Conn.Write(p)
	}
	n, err := c.Conn.Write(p[:len(p)-1])
	if err != nil {
		return n, err
	}
	c.held.Add(1)
	<-c.gate
	m, err := c.Conn.Write(p[len(p)-1:])
	return n + m, err
}
