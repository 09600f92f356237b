package gateway_test

import (
	"bufio"
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

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// BALLET_PARTIAL_MESSAGE_BYTES bounds what all connections together hold for messages not
// yet whole: 64 unauthenticated connections from 8 addresses (within each address's limit)
// each send a first message of 60 KiB but its last byte, which takes 64 KiB of pieces each,
// 4 MiB in all, against a budget of 2 MiB. The replica never holds more than the budget, the
// connections it has no room for are closed 1013 and counted, and a client whose messages
// are short authenticates meanwhile.
func TestPartialMessagesBoundedAcrossConnections(t *testing.T) {
	const (
		n, addrs = 64, 8
		budget   = 2 << 20
		size     = 60 << 10
		pieces   = 64 << 10 // what the reader takes for a payload of size, all but its last byte arrived
	)
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
		PartialMessageBytes: budget, ReadLimit: 256 << 10, AuthTimeout: time.Minute, DrainWindow: 10 * time.Millisecond,
	}})
	if got := env.Server.PartialBytesBudget(); got != budget {
		t.Fatalf("budget %d, want %d", got, budget)
	}
	u, _ := url.Parse(env.URL)
	stop := make(chan struct{})
	var peak atomic.Int64
	var watch sync.WaitGroup
	watch.Go(func() { sample(stop, &peak, func() int { return int(env.Server.PartialBytes()) }) })

	frame := textFrame(strings.Repeat("a", size))
	frame = frame[:len(frame)-1] // all but the last byte
	var closed atomic.Int64
	var wg sync.WaitGroup
	conns := make([]net.Conn, n)
	for i := range conns {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.0.%d", 50+i%addrs))}}
		c, err := d.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
		wg.Go(func() {
			h := &hostile{c: c, br: bufio.NewReader(c)}
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Write([]byte(upgradeRequest(c.RemoteAddr().String(), ""))); err != nil {
				t.Error(err)
				return
			}
			resp, err := http.ReadResponse(h.br, nil)
			if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Errorf("upgrade %d: %v %v", i, resp, err)
				return
			}
			if _, err := c.Write(frame); err != nil {
				return // closed already
			}
			if code, ok := readCloseCode(h); ok {
				if code != websocket.StatusTryAgainLater {
					t.Errorf("connection %d closed %d, want 1013", i, code)
				}
				closed.Add(1)
			}
		})
	}
	// Every connection is either closed, or holds its 64 KiB waiting for the last byte.
	deadline := time.Now().Add(20 * time.Second)
	for {
		held := env.Server.PartialBytes()
		if held%pieces == 0 && closed.Load()+held/pieces == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections closed, %d bytes held: want every one of %d closed or holding %d",
				closed.Load(), held, n, pieces)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := legitimateFrom(t, env, "127.0.0.49", 10*time.Second)
	close(stop)
	watch.Wait()
	held := env.Server.PartialBytes()
	rejected := limitRejections(t, env.Server, "partial_message_bytes")
	t.Logf("%d connections of a first message of %d bytes but its last: %d closed 1013 (%v counted), %d bytes held, "+
		"peak %d, budget %d; a client got in after %v", n, size, closed.Load(), rejected, held, peak.Load(), budget, took)
	if peak.Load() > budget {
		t.Errorf("the replica held %d bytes of messages not yet whole, budget %d", peak.Load(), budget)
	}
	if want := int64(n - budget/pieces); closed.Load() < want {
		t.Errorf("%d connections closed 1013, want at least %d", closed.Load(), want)
	}
	if rejected != float64(closed.Load()) {
		t.Errorf("partial_message_bytes counted %v, want %d", rejected, closed.Load())
	}
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}

// readCloseCode reads frames until the server's close frame: its code, and false when the
// socket ended first.
func readCloseCode(h *hostile) (websocket.StatusCode, bool) {
	for {
		var hd [2]byte
		if _, err := io.ReadFull(h.br, hd[:]); err != nil {
			return 0, false
		}
		p := make([]byte, hd[1]&0x7f) // the server's close frame is short
		if _, err := io.ReadFull(h.br, p); err != nil {
			return 0, false
		}
		if hd[0]&0x0f == 8 && len(p) >= 2 {
			return websocket.StatusCode(uint16(p[0])<<8 | uint16(p[1])), true
		}
	}
}
