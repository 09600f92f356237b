package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// serverReaders counts the goroutines reading an rpc connection.
func serverReaders() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("rpc.(*Conn).readLoop("))
}

// dumpReaders logs the stacks of the rpc readers of a failed test.
func dumpReaders(t *testing.T) {
	if !t.Failed() {
		return
	}
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "rpc.(*Conn).readLoop(") {
			t.Log(g)
		}
	}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Idle connections hold no reader goroutine (Linux), and a parked
// connection still serves requests, receives events, and notices its peer
// going away.
func TestIdleConnectionsParkTheirReaders(t *testing.T) {
	if !readersPark {
		t.Skip("readers park on Linux only, and not in a build with -tags nopark")
	}
	defer dumpReaders(t)
	eventually(t, "earlier tests' readers end", func() bool { return serverReaders() == 0 })
	env := gatewaytest.Start(t, nil)
	env.Project(t, "WEB", "alice", "viewer")
	const n = 60
	ks := make([]*wsClient, n)
	for i := range ks {
		k := login(t, env, codecs[i%2], "alice")
		k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)
		ks[i] = k
	}
	eventually(t, "the idle connections' readers park", func() bool { return serverReaders() <= 2 })

	for round := range 3 {
		appendN(t, env, itemEvent("WEB", "WEB-1", "item.updated", round))
		for i, k := range ks {
			ev, err := k.nextEvent(30 * time.Second)
			if err != nil {
				t.Fatalf("round %d, client %d: %v", round, i, err)
			}
			if fmt.Sprint(ev.Payload["n"]) != fmt.Sprint(round) {
				t.Fatalf("round %d, client %d: payload %v", round, i, ev.Payload)
			}
			k.mustCall("system.ping", nil, nil)
		}
		eventually(t, "the readers park again", func() bool { return serverReaders() <= 2 })
	}

	for _, k := range ks[:n/2] {
		_ = k.ws.CloseNow()
	}
	eventually(t, "the server notices parked peers gone", func() bool {
		return metricValue(t, env.Server, "ballet_gateway_connections") == n/2
	})
	for _, k := range ks[n/2:] {
		k.mustCall("system.ping", nil, nil)
	}
}

// waitParked waits, in a build whose idle readers park, until at most n readers run; in one
// whose readers do not, every connection keeps its reader.
func waitParked(t *testing.T, what string, n int) {
	t.Helper()
	if readersPark {
		eventually(t, what, func() bool { return serverReaders() <= n })
	}
}

// clientFrame is a masked client→server WebSocket frame.
func clientFrame(opcode byte, payload []byte) []byte {
	b := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// readServerFrame reads one unmasked server→client frame.
func readServerFrame(t *testing.T, r *bufio.Reader) (byte, []byte) {
	t.Helper()
	op, p, err := readFrame(r)
	if err != nil {
		t.Fatal(err)
	}
	return op, p
}

// readFrame reads one unmasked server→client frame: its opcode and payload.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, fmt.Errorf("read frame: %w", err)
	}
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		_, _ = io.ReadFull(r, ext[:])
		n = int(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		_, _ = io.ReadFull(r, ext[:])
		n = int(binary.BigEndian.Uint64(ext[:]))
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, fmt.Errorf("read payload: %w", err)
	}
	return h[0] & 0x0f, p, nil
}

// rawClient is a WebSocket client written by hand: the test controls
// exactly what goes into each TCP write.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

// rawDial upgrades /rpc (JSON), writing first after the request in the
// same write, before the 101.
func rawDial(t *testing.T, env *gatewaytest.Env, first []byte) *rawClient {
	t.Helper()
	c := hostileDial(t, env).c
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(append([]byte(upgradeRequest(c.RemoteAddr().String(), "")), first...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return &rawClient{t: t, c: c, br: br}
}

func (r *rawClient) write(frames ...[]byte) {
	r.t.Helper()
	if _, err := r.c.Write(bytes.Join(frames, nil)); err != nil {
		r.t.Fatal(err)
	}
}

// responses reads frames until it has the responses to n requests
// (answered concurrently: in any order), skipping heartbeats.
func (r *rawClient) responses(n int) map[int64][]byte {
	r.t.Helper()
	got := map[int64][]byte{}
	for len(got) < n {
		op, p := readServerFrame(r.t, r.br)
		if op != 1 {
			r.t.Fatalf("opcode %d: %q", op, p)
		}
		var m codec.Message
		if err := codec.JSON.Decode(p, &m); err != nil {
			r.t.Fatalf("undecodable frame %.200s: %v", p, err)
		}
		if m.IsResponse() {
			got[m.ID] = p
		}
	}
	return got
}

// want reads until the response to id.
func (r *rawClient) want(id int64) []byte {
	r.t.Helper()
	got := r.responses(1)
	if got[id] == nil {
		r.t.Fatalf("want the response to %d, got %v", id, got)
	}
	return got[id]
}

func textFrame(s string) []byte { return clientFrame(1, []byte(s)) }

// Frames sent with the upgrade request, before the 101, are read (and the
// connection parks once they are); and a parked connection that gets a
// large frame and a small one in one write answers both, in order.
func TestEarlyAndPipelinedFrames(t *testing.T) {
	defer dumpReaders(t)
	eventually(t, "earlier tests' readers end", func() bool { return serverReaders() == 0 })
	env := gatewaytest.Start(t, nil)
	auth := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, "alice"))
	ping := func(id int) []byte {
		return textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"system.ping"}`, id))
	}

	early := rawDial(t, env, append(textFrame(auth), ping(2)...))
	if got := early.responses(2); got[1] == nil || got[2] == nil {
		t.Fatalf("responses %v", got)
	}
	// Once the early bytes are read, that connection parks like any other.
	waitParked(t, "the early connection's reader parks", 0)
	early.write(ping(3))
	early.want(3)

	r := rawDial(t, env, nil)
	r.write(textFrame(auth))
	r.want(1)
	waitParked(t, "the reader parks", 1)
	for round := range 3 {
		big := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"stream.unsubscribe","params":{"subscription":%q}}`,
			10+2*round, strings.Repeat("x", (64<<10)*(round+1)))
		r.write(textFrame(big), ping(11+2*round), ping(100+round))
		got := r.responses(3)
		if p := got[int64(10+2*round)]; !bytes.Contains(p, []byte(`"error"`)) {
			t.Fatalf("unsubscribe of an unknown id: %.200s", p)
		}
		if got[int64(11+2*round)] == nil || got[int64(100+round)] == nil {
			t.Fatalf("responses %v", got)
		}
		waitParked(t, "the reader parks again", 1)
	}
}

// Many connections share the server's heartbeat timer: each gets its own
// heartbeats, silent ones close with 4000 after three intervals while the
// others stay, and tokens expiring at different times close each
// connection at its own expiry. (The tokens count down while the heartbeats
// are tried.)
func TestHeartbeatsOfManyConnections(t *testing.T) {
	t.Parallel() // it waits on heartbeat intervals and tokens' lives, on a server of its own
	// Long enough that a loaded machine's pauses (of the goroutine that talks, of the
	// server's timers) do not add up to the three intervals of silence that close one.
	const interval = time.Second
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{HeartbeatInterval: interval}})

	// Tokens expiring 2 s apart close their connections in that order. (Expiry has second
	// resolution: the first lives 2 to 3 s, time for the three to authenticate.)
	exp := make([]*wsClient, 3)
	for i := range exp {
		exp[i] = dial(t, env.URL, codec.JSON)
		tok := authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: []string{gatewaytest.Audience}, TTL: time.Duration(2*i+3) * time.Second})
		exp[i].mustCall("auth", map[string]string{"token": tok}, nil)
	}
	closedAt := make([]time.Time, len(exp))
	var closes sync.WaitGroup
	for i, k := range exp {
		closes.Go(func() {
			select {
			case <-k.done:
				closedAt[i] = time.Now()
			case <-time.After(30 * time.Second):
			}
		})
	}
	talk := make(chan struct{})
	talked := make(chan struct{})
	go func() { // keep them talking, so only expiry can close them
		defer close(talked)
		for {
			for _, k := range exp {
				_ = k.ws.Write(context.Background(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"$/heartbeat","params":{"time":1}}`))
			}
			select {
			case <-talk:
				return
			case <-time.After(interval / 2):
			}
		}
	}()
	defer func() {
		close(talk)
		<-talked
	}()

	const n = 40
	ks := make([]*wsClient, n)
	// Half stay talkative, each from its login on; the other half fall silent.
	var talking atomic.Int32 // ks[:talking] are logged in
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval / 2)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for i, k := range ks[:talking.Load()] {
					// Not k.notify: t.Fatal belongs to the test's goroutine.
					frame := []byte(`{"jsonrpc":"2.0","method":"$/heartbeat","params":{"time":1}}`)
					typ := websocket.MessageText
					if codecs[i%2].Binary() {
						frame = []byte("\x83\xa7jsonrpc\xa32.0\xa6method\xab$/heartbeat\xa6params\x81\xa4time\x01")
						typ = websocket.MessageBinary
					}
					_ = k.ws.Write(context.Background(), typ, frame)
				}
			}
		}
	}()
	for i := range n / 2 {
		ks[i] = login(t, env, codecs[i%2], "alice")
		talking.Add(1)
	}
	start := time.Now()
	silentSince := make([]time.Time, n) // before the auth, which a silence counts from
	for i := n / 2; i < n; i++ {
		silentSince[i] = time.Now()
		ks[i] = login(t, env, codecs[i%2], "alice")
	}
	for i := n / 2; i < n; i++ {
		if code := ks[i].waitClose(3*interval + 15*time.Second); code != gateway.StatusHeartbeatTimeout {
			t.Fatalf("silent client %d: close %d, want 4000", i, code)
		}
		if el := time.Since(silentSince[i]); el < 3*interval-50*time.Millisecond {
			t.Fatalf("silent client %d closed after %v, before three intervals", i, el)
		}
	}
	close(stop)
	<-done
	for i, k := range ks[:n/2] {
		beats := 0
		for drained := false; !drained; {
			select {
			case m := <-k.msgs:
				if m.Method == "$/heartbeat" {
					beats++
				}
			default:
				drained = true
			}
		}
		if beats < 2 {
			t.Fatalf("talkative client %d got %d heartbeats in %v", i, beats, time.Since(start))
		}
		k.mustCall("system.ping", nil, nil)
	}

	for i, k := range exp {
		if code := k.waitClose(20 * time.Second); code != gateway.StatusUnauthenticated {
			t.Fatalf("client %d: close %d, want 4001", i, code)
		}
	}
	closes.Wait()
	for i := 1; i < len(exp); i++ {
		if !closedAt[i-1].Before(closedAt[i]) {
			t.Fatalf("token %d expired at %v, token %d at %v: not in the order of their expiry",
				i, closedAt[i].Format(time.StampMilli), i-1, closedAt[i-1].Format(time.StampMilli))
		}
	}
}
