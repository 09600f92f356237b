package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/streams/pgtest"
)

func TestMain(m *testing.M) { leaktest.Main(m, pgtest.StopShared) }

var codecs = []codec.Codec{codec.MsgPack, codec.JSON}

func forEachCodec(t *testing.T, f func(t *testing.T, c codec.Codec)) {
	for _, c := range codecs {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			f(t, c)
		})
	}
}

// subtest is one of together's: a name and a test.
type subtest struct {
	name string
	run  func(t *testing.T)
}

// together runs the subtests all at once, however few parallel tests -parallel allows: for
// subtests that spend their time waiting out the server's deadlines on sockets of their own
// rather than on the CPU. (t.Run may be called from several goroutines, and a subtest that
// does not call t.Parallel takes no place among the parallel tests.)
func together(t *testing.T, subtests ...subtest) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range subtests {
		wg.Go(func() { t.Run(s.name, s.run) })
	}
	wg.Wait()
}

// togetherCases is together for a table: run(t, c) for every case, named name(c).
func togetherCases[C any](t *testing.T, cases []C, name func(C) string, run func(*testing.T, C)) {
	t.Helper()
	subtests := make([]subtest, len(cases))
	for i, c := range cases {
		subtests[i] = subtest{name(c), func(t *testing.T) { run(t, c) }}
	}
	together(t, subtests...)
}

// wsClient is a bare protocol client: raw frames in, decoded messages out.
type wsClient struct {
	t      testing.TB
	ws     *websocket.Conn
	c      codec.Codec
	msgs   chan *codec.Message
	done   chan struct{}
	err    error // why reading ended; valid after done
	nextID int64
	mu     sync.Mutex
	held   []*codec.Message // read but not yet consumed, in order
}

func dial(t testing.TB, url string, c codec.Codec) *wsClient {
	t.Helper()
	ws, err := dialRaw(t, url, []string{c.Name()}, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	if ws.Subprotocol() != c.Name() {
		t.Fatalf("negotiated %q, want %q", ws.Subprotocol(), c.Name())
	}
	return newClient(t, ws, c)
}

func dialRaw(t testing.TB, url string, protocols []string, header http.Header) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: protocols, HTTPHeader: header})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return ws, nil
}

func newClient(t testing.TB, ws *websocket.Conn, c codec.Codec) *wsClient {
	k := &wsClient{t: t, ws: ws, c: c, msgs: make(chan *codec.Message, 100000), done: make(chan struct{})}
	go k.readLoop()
	t.Cleanup(func() {
		ws.CloseNow()
		<-k.done
	})
	return k
}

func (k *wsClient) readLoop() {
	defer close(k.done)
	for {
		typ, data, err := k.ws.Read(context.Background())
		if err != nil {
			k.err = err
			return
		}
		if (typ == websocket.MessageBinary) != k.c.Binary() {
			k.err = fmt.Errorf("server sent a %v frame on %s", typ, k.c.Name())
			return
		}
		var m codec.Message
		if err := k.c.Decode(data, &m); err != nil {
			k.err = fmt.Errorf("server sent an undecodable frame %q: %v", data, err)
			return
		}
		k.msgs <- &m
	}
}

func (k *wsClient) writeRaw(data []byte) {
	k.t.Helper()
	typ := websocket.MessageText
	if k.c.Binary() {
		typ = websocket.MessageBinary
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.ws.Write(ctx, typ, data); err != nil {
		k.t.Fatalf("write: %v", err)
	}
}

// send sends a request and returns its id.
func (k *wsClient) send(method string, params any) int64 {
	k.t.Helper()
	k.mu.Lock()
	k.nextID++
	id := k.nextID
	k.mu.Unlock()
	k.write(&codec.Message{ID: id, HasID: true, Method: method}, params)
	return id
}

func (k *wsClient) notify(method string, params any) {
	k.t.Helper()
	k.write(&codec.Message{Method: method}, params)
}

func (k *wsClient) write(m *codec.Message, params any) {
	k.t.Helper()
	if params != nil {
		raw, err := k.c.Marshal(params)
		if err != nil {
			k.t.Fatal(err)
		}
		m.Params = raw
	}
	frame, err := k.c.Encode(nil, m)
	if err != nil {
		k.t.Fatal(err)
	}
	k.writeRaw(frame)
}

// next returns the next message that is not a heartbeat.
func (k *wsClient) next(timeout time.Duration) (*codec.Message, error) {
	if len(k.held) > 0 {
		m := k.held[0]
		k.held = k.held[1:]
		return m, nil
	}
	deadline := time.After(timeout)
	for {
		select {
		case m := <-k.msgs:
			if m.Method == "$/heartbeat" {
				continue
			}
			return m, nil
		case <-k.done:
			select {
			case m := <-k.msgs:
				if m.Method == "$/heartbeat" {
					continue
				}
				return m, nil
			default:
			}
			return nil, k.err
		case <-deadline:
			return nil, errors.New("timeout waiting for a message")
		}
	}
}

func (k *wsClient) mustNext() *codec.Message {
	k.t.Helper()
	m, err := k.next(30 * time.Second)
	if err != nil {
		k.t.Fatal(err)
	}
	return m
}

// call sends a request and waits for its response, decoding the result.
// Notifications that arrive first are kept for later reads.
func (k *wsClient) call(method string, params, result any) *codec.Error {
	k.t.Helper()
	id := k.send(method, params)
	return k.await(id, result)
}

func (k *wsClient) await(id int64, result any) *codec.Error {
	k.t.Helper()
	var held []*codec.Message
	defer func() { k.held = append(held, k.held...) }()
	for {
		m := k.mustNext()
		if m.IsResponse() && m.HasID && m.ID == id {
			if m.Error != nil {
				return m.Error
			}
			if result != nil {
				if err := k.c.Unmarshal(m.Result, result); err != nil {
					k.t.Fatalf("result of %d: %v", id, err)
				}
			}
			return nil
		}
		held = append(held, m)
	}
}

// pipeline sends a request of method for each of params, all before any answer, and returns
// the answers in the order of params. Notifications that arrive meanwhile are kept for later
// reads.
func (k *wsClient) pipeline(method string, params []any) []*codec.Message {
	k.t.Helper()
	return k.answers(k.sendAll(method, params))
}

// sendAll sends a request of method for each of params and returns their ids.
func (k *wsClient) sendAll(method string, params []any) []int64 {
	k.t.Helper()
	ids := make([]int64, len(params))
	for i, p := range params {
		ids[i] = k.send(method, p)
	}
	return ids
}

// answers waits for the answers to the requests ids, in the order of ids, keeping the
// notifications that arrive meanwhile for later reads.
func (k *wsClient) answers(ids []int64) []*codec.Message {
	k.t.Helper()
	at := make(map[int64]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	answers := make([]*codec.Message, len(ids))
	var held []*codec.Message
	defer func() { k.held = append(held, k.held...) }()
	for n := 0; n < len(ids); {
		m := k.mustNext()
		if i, ok := at[m.ID]; ok && m.IsResponse() && m.HasID && answers[i] == nil {
			answers[i] = m
			n++
			continue
		}
		held = append(held, m)
	}
	return answers
}

// hangUp closes the connection from the client's end, waits for its reader and lets go of
// what it read and did not consume, so that what the test measures next is the server's.
func (k *wsClient) hangUp() {
	k.ws.CloseNow()
	<-k.done
	k.msgs, k.held = nil, nil
}

func (k *wsClient) mustCall(method string, params, result any) {
	k.t.Helper()
	if e := k.call(method, params, result); e != nil {
		k.t.Fatalf("%s: error %d %s", method, e.Code, e.Message)
	}
}

func (k *wsClient) wantError(method string, params any, code int) *codec.Error {
	k.t.Helper()
	e := k.call(method, params, nil)
	if e == nil || e.Code != code {
		k.t.Fatalf("%s: got %+v, want error %d", method, e, code)
	}
	return e
}

// closeSlack is how long waitClose waits beyond the bound a test gives it: a loaded machine
// can run the server's timers, and the close, late.
const closeSlack = 20 * time.Second

// waitClose waits for the server to close the connection, by timeout (what the server
// promises, or a generous bound) and closeSlack more, and returns the code.
func (k *wsClient) waitClose(timeout time.Duration) websocket.StatusCode {
	k.t.Helper()
	select {
	case <-k.done:
		return websocket.CloseStatus(k.err)
	case <-time.After(timeout + closeSlack):
		k.t.Fatalf("connection not closed within %v and %v of slack", timeout, closeSlack)
		return 0
	}
}

type authResult struct {
	Subject   string `json:"subject"`
	ExpiresAt int64  `json:"expires_at"`
}

// login dials and authenticates as subject.
func login(t testing.TB, env *gatewaytest.Env, c codec.Codec, subject string) *wsClient {
	t.Helper()
	k := dial(t, env.URL, c)
	var res authResult
	k.mustCall("auth", map[string]string{"token": env.Token(t, subject)}, &res)
	if res.Subject != subject {
		t.Fatalf("auth subject %q", res.Subject)
	}
	return k
}

// heapPeak samples the heap until the function it returns is called, which returns the
// highest HeapAlloc seen.
func heapPeak(every time.Duration) func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		// runtime/metrics, not ReadMemStats: a sample does not stop the world (which
		// ReadMemStats would, every few milliseconds for as long as a flood runs).
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}} // ReadMemStats' HeapAlloc
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				metrics.Read(sample)
				if v := sample[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-sampled
		return peak.Load()
	}
}

// labeledMetric is the value of the counter or gauge name{label=value}, and whether it exists.
func labeledMetric(t testing.TB, srv *gateway.Server, name, label, value string) (float64, bool) {
	t.Helper()
	fams, err := srv.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
					found = true
				}
			}
		}
	}
	return sum, found
}

// metricValue sums the samples of a counter or gauge family.
func metricValue(t testing.TB, srv *gateway.Server, name string) float64 {
	t.Helper()
	fams, err := srv.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
