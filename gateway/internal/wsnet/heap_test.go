package wsnet

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/heaptest"
)

// idleConnHeap bounds what one idle connection of this package holds on the heap, parked
// between messages: its Transport and writer, the server's socket, and the test's own share
// (the client's socket and two cleanups, about 400 bytes). It was about 1.9 KB when set; with
// coder/websocket's connection under the Transport it was 3.5 KB.
const idleConnHeap = 2100

// Idle connections, upgraded and parked (where readers park), hold at most idleConnHeap bytes
// of heap each.
func TestIdleConnectionHeap(t *testing.T) {
	const n = 400
	s := newTestServer(t, nil)
	resume := func() {}
	hold := func(i int) (net.Conn, accepted) {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		req := "GET / HTTP/1.1\r\nHost: " + s.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade %d: %v %v", i, resp, err)
		}
		a := s.accept(t)
		a.t.Park(resume)
		return c, a
	}
	hold(-1) // the poller's loop and the pools, which every later connection shares
	conns := make([]net.Conn, n)
	held := make([]accepted, n)
	base := heaptest.LiveHeap()
	for i := range n {
		conns[i], held[i] = hold(i)
	}
	per := (heaptest.LiveHeap() - base) / n
	t.Logf("%d bytes of heap per idle connection", per)
	if per > idleConnHeap {
		t.Fatalf("an idle connection holds %d bytes of heap, bound %d", per, idleConnHeap)
	}
}
