package wsnet

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/wsframe"
	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/rpc"
)

// TestMain fails when a goroutine of this package outlives the tests: a
// poller's loop, a flusher, a reader.
func TestMain(m *testing.M) { leaktest.Main(m) }

// owner is what a session does for its transport: the first code chosen wins.
type owner struct {
	mu     sync.Mutex
	code   websocket.StatusCode
	reason string
}

var _ Owner = (*owner)(nil)

func (o *owner) CloseWith(code websocket.StatusCode, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.code == 0 {
		o.code, o.reason = code, reason
	}
}

func (o *owner) Pinged(context.Context, []byte) bool { return true }

func (o *owner) Framed() {}

func (o *owner) CloseCode() (websocket.StatusCode, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.code, o.reason
}

// testReadLimit is the read limit of the test server's transports.
const testReadLimit = 1 << 10

// accepted is a connection the test server upgraded: its transport,
// attached to o (binary frames when the request's query has binary).
type accepted struct {
	t *Transport
	o *owner
}

// testServer upgrades every request with an Upgrader and hands each
// connection to the test.
type testServer struct {
	u    *Upgrader
	addr string // host:port
	got  chan accepted
}

func newTestServer(t testing.TB, o *Options) *testServer {
	t.Helper()
	u := NewUpgrader(o)
	s := &testServer{u: u, got: make(chan accepted, 8)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr, err := u.Accept(w, r, nil)
		if err != nil {
			return
		}
		a := accepted{t: tr, o: &owner{}}
		tr.Attach(a.o, r.URL.Query().Has("binary"), testReadLimit)
		s.got <- a
	}))
	t.Cleanup(hs.Close)
	s.addr = strings.TrimPrefix(hs.URL, "http://")
	return s
}

// accept is the server's end of the next connection; it is closed as the test ends.
func (s *testServer) accept(t testing.TB) accepted {
	t.Helper()
	select {
	case a := <-s.got:
		t.Cleanup(a.t.Abort)
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no connection upgraded")
		return accepted{}
	}
}

// dial opens a WebSocket with coder/websocket's client.
func (s *testServer) dial(t *testing.T, query string) (*websocket.Conn, accepted) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+s.addr+"/"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws, s.accept(t)
}

// dialRaw sends an upgrade request and first in one write, and reads the 101: the test writes
// the frames itself.
func (s *testServer) dialRaw(t testing.TB, first []byte) (net.Conn, *bufio.Reader, accepted) {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET / HTTP/1.1\r\nHost: " + s.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := c.Write(append([]byte(req), first...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return c, br, s.accept(t)
}

// newTransport is a Transport over c, as Upgrader.Accept makes one (without a poller), whose
// flusher waits stall at most for the peer, counting payloads not yet whole in partial.
func newTransport(c net.Conn, stall time.Duration, partial *partialBudget) *Transport {
	t := &Transport{}
	t.setConn(c, stall, partial)
	return t
}

// masked is a client's text frame of p, under the mask 0 (which leaves p as it is).
func masked(p string) []byte {
	if len(p) > 125 {
		panic("masked: a short frame only")
	}
	return append([]byte{0x81, 0x80 | byte(len(p)), 0, 0, 0, 0}, p...)
}

// readFrame reads one short server frame from br: its opcode and payload.
func readFrame(t *testing.T, br *bufio.Reader) (wsframe.Opcode, []byte) {
	t.Helper()
	h := make([]byte, 2)
	if _, err := io.ReadFull(br, h); err != nil || h[1] > 125 {
		t.Fatalf("frame header %x, %v", h, err)
	}
	p := make([]byte, h[1])
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	return wsframe.Opcode(h[0] & 0x0f), p
}

// readClose reads server frames from br up to a close frame and returns its code.
func readClose(t *testing.T, br *bufio.Reader) websocket.StatusCode {
	t.Helper()
	for {
		if op, p := readFrame(t, br); op == wsframe.OpClose && len(p) >= 2 {
			return websocket.StatusCode(binary.BigEndian.Uint16(p))
		}
	}
}

// bodies makes messages of frames, each its Body.
func bodies(frames ...[]byte) []rpc.Out {
	out := make([]rpc.Out, len(frames))
	for i, f := range frames {
		out[i] = rpc.Out{Body: f}
	}
	return out
}
