package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
)

// client is one lean connection to /rpc: one reader goroutine reading
// frames into a reused buffer and extracting only what the benchmark
// needs (a stream.event's seq). Calls (auth, subscribe, unsubscribe) are
// matched to their responses by id.
type client struct {
	b     *bench
	idx   int
	ws    wsConn
	codec codec.Codec
	// overHTTP: the connection is a POST /rpc's response (httpstream.go), which carries nothing
	// from the client after its request.
	overHTTP bool

	sub atomic.Pointer[subState] // the subscription whose events are tracked

	mu     sync.Mutex
	nextID int64
	calls  map[int64]pendingCall
	err    error // why the reader stopped
	// closeCode is the server's close code when the connection was lost
	// (1006 without a close frame); written before done closes.
	closeCode int

	closing atomic.Bool
	quit    chan struct{} // closed by close: a held reader stops
	done    chan struct{} // closed when the reader has stopped

	// hold, when set, holds the reader before its next frame until the
	// channel closes: the connection's socket is not read at all meanwhile.
	hold atomic.Pointer[<-chan struct{}]
	// fanout counts the tracked subscription's events in idle mode with --fanout-events.
	fanout fanoutState
	// closedCh, when set (burst mode), receives the reason of each
	// stream.closed of the tracked subscription; it never blocks the reader.
	closedCh chan string
}

// subState names the tracked subscription and its tracker.
type subState struct {
	id string
	tr *tracker
}

// pendingCall is a request waiting for its response. clearSub, when set,
// stops tracking that subscription as the response is read, so no event
// of it is tracked after the caller has seen the response.
type pendingCall struct {
	ch       chan callResult
	clearSub string
}

type callResult struct {
	result []byte
	err    error
}

// errClientClosed: the connection ended before a call was answered.
var errClientClosed = errors.New("connection closed")

// rpcError is an error response.
type rpcError struct {
	method string
	e      *codec.Error
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("%s: error %d: %s", e.method, e.e.Code, e.e.Message)
}

// dial opens a connection to --url and starts its reader.
func (b *bench) dial(ctx context.Context, idx int) (*client, error) {
	return b.dialURL(ctx, idx, b.cfg.url)
}

// dialURL opens a connection to u and starts its reader.
func (b *bench) dialURL(ctx context.Context, idx int, u string) (*client, error) {
	limit := int64(1<<20 + 2*b.cfg.payloadBytes)
	var conn wsConn
	if b.cfg.leanClient() {
		dial := (&net.Dialer{}).DialContext
		if src := b.cfg.sourceDialer(); src != nil {
			dial = src.DialContext
		}
		lc, err := dialLean(ctx, dial, u, b.cfg.codec.Name(), b.cfg.codec.Binary(), limit)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", u, err)
		}
		conn = lc
	} else {
		ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
			HTTPClient:   b.http,
			Subprotocols: []string{b.cfg.codec.Name()},
		})
		if err != nil {
			if resp != nil && resp.Body != nil {
				resp.Body.Close()
			}
			return nil, fmt.Errorf("dial %s: %w", u, err)
		}
		if ws.Subprotocol() != b.cfg.codec.Name() {
			ws.CloseNow()
			return nil, fmt.Errorf("dial %s: the server did not accept subprotocol %s", u, b.cfg.codec.Name())
		}
		ws.SetReadLimit(limit)
		lib := &libraryConn{ws: ws, typ: websocket.MessageText}
		if b.cfg.codec.Binary() {
			lib.typ = websocket.MessageBinary
		}
		conn = lib
	}
	c := &client{
		b: b, idx: idx, ws: conn, codec: b.cfg.codec,
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	if b.cfg.mode == modeBurst {
		c.closedCh = make(chan string, 8)
	}
	go c.readLoop()
	return c, nil
}

// newHTTPClient is the transport for WebSocket handshakes: no proxies, no
// pooling (every handshake is a new TCP connection anyway); with src, dialed
// from its addresses in turn.
func newHTTPClient(src *sourceDialer) *http.Client {
	t := &http.Transport{
		DisableKeepAlives:   true,
		DisableCompression:  true,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if src != nil {
		t.DialContext = src.DialContext
	}
	return &http.Client{Transport: t}
}

// close ends the connection without a close handshake and waits for the
// reader.
func (c *client) close() {
	if !c.closing.Swap(true) {
		close(c.quit)
	}
	_ = c.ws.closeNow()
	<-c.done
}

// holdUntil stops the reader before its next frame until release closes.
func (c *client) holdUntil(release <-chan struct{}) { c.hold.Store(&release) }

// held waits while the reader is held; it reports false once the
// connection is closing.
func (c *client) held() bool {
	h := c.hold.Load()
	if h == nil {
		return true
	}
	select {
	case <-*h:
		c.hold.Store(nil)
		return true
	case <-c.quit:
		return false
	}
}

func (c *client) readLoop() {
	defer close(c.done)
	buf := make([]byte, 0, 512)
	var fi frameInfo
	for {
		if !c.held() {
			c.stop(errClientClosed)
			return
		}
		var err error
		if buf, err = c.ws.readMessage(buf[:0]); err != nil {
			c.stop(err)
			return
		}
		if err := classify(c.codec, buf, &fi); err != nil {
			c.b.badFrames.Add(1)
			continue
		}
		c.handle(&fi)
	}
}

// readFrame reads r to its end into buf.
func readFrame(buf []byte, r io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (c *client) handle(fi *frameInfo) {
	switch fi.kind {
	case frameEvent:
		st := c.sub.Load()
		if st == nil || string(fi.sub) != st.id {
			return // an event of a subscription already left behind
		}
		if h := c.b.opts.DropEvent; h != nil && h(c.idx, fi.seq) {
			return
		}
		if c.b.cfg.fanoutEvents > 0 {
			c.fanoutEvent()
		}
		st.tr.event(fi.seq, nowNs(), c.b.latCommits, &c.b.lat, &c.b.pendingDropped)
	case frameOutput:
		if w := c.b.watches; w != nil {
			w.output(fi, nowNs())
		}
	case frameClosed:
		if w := c.b.watches; w != nil && w.closed(fi) {
			return
		}
		st := c.sub.Load()
		if st == nil || string(fi.sub) != st.id {
			return
		}
		if fi.reason == "lagging" {
			st.tr.lagged = true
			c.b.laggingCloses.Add(1)
		} else {
			st.tr.closed = fi.reason
			c.b.serverCloses.Add(1)
		}
		st.tr.ended.Store(true)
		if c.closedCh != nil {
			select {
			case c.closedCh <- fi.reason:
			default:
			}
		}
	case frameResponse:
		c.mu.Lock()
		pc, ok := c.calls[fi.id]
		delete(c.calls, fi.id)
		c.mu.Unlock()
		if !ok {
			return
		}
		if st := c.sub.Load(); pc.clearSub != "" && st != nil && st.id == pc.clearSub {
			c.sub.Store(nil)
		}
		ch := pc.ch
		if fi.err != nil {
			ch <- callResult{err: &codec.Error{Code: fi.err.Code, Message: fi.err.Message, Data: bytes.Clone(fi.err.Data)}}
		} else {
			ch <- callResult{result: append([]byte(nil), fi.result...)}
		}
	case frameHeartbeat:
		if c.overHTTP {
			return // the server's heartbeats over HTTP keep proxies open and need no answer
		}
		// Answering each server heartbeat keeps the connection alive at
		// the server's own cadence without a timer per connection.
		c.notify(protocol.Heartbeat, struct {
			Time int64 `json:"time"`
		}{time.Now().UnixMilli()})
	}
}

// stop fails the pending calls once the reader has stopped.
func (c *client) stop(err error) {
	c.mu.Lock()
	c.err = err
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, pc := range calls {
		pc.ch <- callResult{err: fmt.Errorf("%w: %v", errClientClosed, err)}
	}
	// A response that ends after its stream.closed (or its request's refusal) is no lost
	// connection: a WebSocket stays open then.
	if !c.closing.Load() && !errors.Is(err, errResponseDone) {
		c.b.disconnects.Add(1)
		c.closeCode = closeCode(err)
		c.b.noteError(fmt.Errorf("connection %d lost: %w", c.idx, err))
		if st := c.sub.Load(); st != nil {
			st.tr.ended.Store(true)
		}
	}
}

// closeCode is the code of the close frame that ended a connection, or
// 1006 (abnormal closure) when none was read.
func closeCode(err error) int {
	var ce *closeError
	if errors.As(err, &ce) {
		return ce.code
	}
	if s := websocket.CloseStatus(err); s != -1 {
		return int(s)
	}
	return int(websocket.StatusAbnormalClosure)
}

// send writes one request and returns the channel its response arrives on.
func (c *client) send(ctx context.Context, method string, params any) (<-chan callResult, error) {
	return c.sendCall(ctx, method, params, "")
}

func (c *client) sendCall(ctx context.Context, method string, params any, clearSub string) (<-chan callResult, error) {
	raw, err := c.codec.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan callResult, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w: %v", method, errClientClosed, err)
	}
	c.nextID++
	id := c.nextID
	if c.calls == nil {
		c.calls = make(map[int64]pendingCall, 2)
	}
	c.calls[id] = pendingCall{ch: ch, clearSub: clearSub}
	c.mu.Unlock()
	frame, err := c.codec.Encode(nil, &codec.Message{ID: id, HasID: true, Method: method, Params: raw})
	if err == nil {
		err = c.ws.write(ctx, frame)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return ch, nil
}

// wait returns a call's result.
func wait(ctx context.Context, method string, ch <-chan callResult) ([]byte, error) {
	select {
	case r := <-ch:
		var ce *codec.Error
		if errors.As(r.err, &ce) {
			return nil, &rpcError{method: method, e: ce}
		}
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		return r.result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer: %w", method, ctx.Err())
	}
}

func (c *client) notify(method string, params any) {
	raw, err := c.codec.Marshal(params)
	if err != nil {
		return
	}
	frame, err := c.codec.Encode(nil, &codec.Message{Method: method, Params: raw})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.ws.write(ctx, frame)
}

type subscribeParams struct {
	Subscription string `json:"subscription"`
	Stream       string `json:"stream"`
	FromSeq      *int64 `json:"from_seq,omitempty"`
}

type subscribeResult struct {
	Subscription string `json:"subscription"`
	Seq          int64  `json:"seq"`
}

// authSubscribe sends auth and, when subID is set, stream.subscribe right
// behind it (the server processes them in order), then waits for both.
// Events of the subscription are tracked in tr from the first one, even
// when they arrive before the response.
func (c *client) authSubscribe(ctx context.Context, token, subID string, tr *tracker, fromSeq *int64) (int64, error) {
	authCh, err := c.send(ctx, protocol.Auth, struct {
		Token string `json:"token"`
	}{token})
	if err != nil {
		return 0, err
	}
	var subCh <-chan callResult
	if subID != "" {
		c.sub.Store(&subState{id: subID, tr: tr})
		if subCh, err = c.send(ctx, protocol.StreamSubscribe, subscribeParams{
			Subscription: subID, Stream: c.b.cfg.streamName, FromSeq: fromSeq,
		}); err != nil {
			// A refused auth closes the connection, possibly before the
			// subscribe is written: its answer is the error to report.
			if _, aerr := wait(ctx, protocol.Auth, authCh); aerr != nil {
				return 0, aerr
			}
			return 0, err
		}
	}
	if _, err := wait(ctx, protocol.Auth, authCh); err != nil {
		return 0, err
	}
	if subCh == nil {
		return 0, nil
	}
	return c.subscribeResult(ctx, subCh)
}

// subscribe subscribes again on an authenticated connection.
func (c *client) subscribe(ctx context.Context, subID string, tr *tracker, fromSeq *int64) (int64, error) {
	c.sub.Store(&subState{id: subID, tr: tr})
	ch, err := c.send(ctx, protocol.StreamSubscribe, subscribeParams{
		Subscription: subID, Stream: c.b.cfg.streamName, FromSeq: fromSeq,
	})
	if err != nil {
		return 0, err
	}
	return c.subscribeResult(ctx, ch)
}

func (c *client) subscribeResult(ctx context.Context, ch <-chan callResult) (int64, error) {
	raw, err := wait(ctx, "stream.subscribe "+c.b.cfg.streamName, ch)
	if err != nil {
		return 0, err
	}
	var res subscribeResult
	if err := c.codec.Unmarshal(raw, &res); err != nil {
		return 0, fmt.Errorf("stream.subscribe: bad result: %w", err)
	}
	return res.Seq, nil
}

// unsubscribe ends the tracked subscription; once it returns, no more of
// its events are tracked.
func (c *client) unsubscribe(ctx context.Context, subID string) error {
	ch, err := c.sendCall(ctx, protocol.StreamUnsubscribe, struct {
		Subscription string `json:"subscription"`
	}{subID}, subID)
	if err != nil {
		return err
	}
	_, err = wait(ctx, protocol.StreamUnsubscribe, ch)
	return err
}

// epoch anchors nowNs to the monotonic clock.
var epoch = time.Now()

// nowNs is a monotonic timestamp in ns, shared by writers and readers.
func nowNs() int64 { return int64(time.Since(epoch)) }
