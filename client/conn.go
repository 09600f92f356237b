package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// minRefresh is the shortest wait between two auth.refresh attempts, so a
// token source that keeps returning the same token cannot make the client
// spin as its expiry nears.
const minRefresh = time.Second

// closeGrace is how long Close waits for the server to answer its close
// frame.
const closeGrace = time.Second

// conn is one authenticated connection, over a WebSocket or HTTP, with its
// heartbeat and token refresh goroutines.
type conn struct {
	rpc.NoHooks // but OnMessage
	c           *Client
	gen         uint64 // the client's connection counter, from 1
	carrier
	rpc      *rpc.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	subject  string
	limits   Limits        // advertised by the auth result
	beat     time.Duration // how often to send $/heartbeat
	silence  time.Duration // three of these without a frame end the connection
	lastRecv atomic.Int64  // Unix ns of the last frame from the server
	wg       sync.WaitGroup

	mu    sync.Mutex
	cause error // why the client ended the connection, when it did
}

// wsTransport carries one JSON-RPC message per WebSocket frame.
type wsTransport struct {
	ws  *websocket.Conn
	typ websocket.MessageType
}

var _ rpc.Transport = (*wsTransport)(nil)

func (t *wsTransport) Read(ctx context.Context) ([]byte, error) {
	typ, data, err := t.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != t.typ {
		return nil, ErrFrameKind
	}
	return data, nil
}

func (t *wsTransport) Write(ctx context.Context, frame []byte) error {
	return t.ws.Write(ctx, t.typ, frame)
}

// connect dials, authenticates and starts the connection's goroutines. With TransportAuto, a
// WebSocket that does not open is followed by an attempt over HTTP, with a ConnectTimeout of
// its own; when that connection is made, HTTP is kept for WebSocketRetry.
func (c *Client) connect(ctx context.Context, gen uint64) (*conn, error) {
	actx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	tok, err := c.o.Token(actx)
	if err != nil {
		return nil, fmt.Errorf("client: token: %w", err)
	}
	k, err := c.dial(actx)
	if err == nil {
		return c.start(actx, gen, k, tok)
	}
	if k.over != TransportWebSocket || !c.fallsBack(ctx, err) {
		return nil, err
	}
	hctx, hcancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer hcancel()
	cn, herr := c.start(hctx, gen, &carrier{over: TransportHTTP, ht: c.newHTTPTransport(), fellBack: err}, tok)
	if herr != nil {
		return nil, herr
	}
	c.mu.Lock()
	c.wsAfter = time.Now().Add(c.o.WebSocketRetry)
	c.mu.Unlock()
	return cn, nil
}

// start authenticates a connection over k with tok and starts its goroutines.
func (c *Client) start(ctx context.Context, gen uint64, k *carrier, tok string) (*conn, error) {
	cn := &conn{c: c, gen: gen, carrier: *k}
	cn.ctx, cn.cancel = context.WithCancel(c.ctx)
	t, cd := k.transport(c)
	cn.rpc = rpc.NewConn(t, cd, &rpc.Options{
		Handler: rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) { return c.route(cn, req) }),
		Hooks:   cn,
		Logger:  c.log,
	})
	cn.OnMessage()
	cn.rpc.Start(cn.ctx)
	sent := time.Now()
	var ar protocol.AuthResult
	if err := cn.call(ctx, protocol.Auth, protocol.AuthParams{Token: tok}, &ar); err != nil {
		cn.shutdown()
		var re *rpc.Error
		if k.fellBack != nil && !errors.As(err, &re) {
			// Neither way reached a gateway: say both, the WebSocket's failure first.
			return nil, fmt.Errorf("%w; over HTTP: %v", k.fellBack, err)
		}
		return nil, fmt.Errorf("client: auth: %w", err)
	}
	cn.subject = ar.Subject
	cn.limits = limitsOf(ar.Limits)
	cn.beat, cn.silence = heartbeats(c.o.HeartbeatInterval, cn.limits.Heartbeat)
	if cn.ht == nil {
		// Over HTTP the server sends heartbeats on each open response, and the transport
		// watches them; the client sends none.
		cn.wg.Add(1)
		go cn.keepalive()
	}
	cn.wg.Add(1)
	go cn.refreshLoop(sent, time.Unix(ar.ExpiresAt, 0))
	return cn, nil
}

// OnMessage notes when the server last sent a frame, for heartbeats (rpc.Hooks).
func (cn *conn) OnMessage() { cn.lastRecv.Store(time.Now().UnixNano()) }

// call sends a request, and again after a refusal for the request rate,
// up to Options.RateLimitRetries times.
func (cn *conn) call(ctx context.Context, method string, params, result any) error {
	return cn.callRetrying(ctx, cn.c.o.RateLimitRetries, method, params, result)
}

// callPatient is call for the client's own subscribes after a reconnect,
// which come in a burst: refusals for the rate are sent again for as long
// as ctx and the connection last.
func (cn *conn) callPatient(ctx context.Context, method string, params, result any) error {
	return cn.callRetrying(ctx, -1, method, params, result)
}

// call1 sends one request; a connection that ends first is
// ErrConnectionLost, a -32029 answer a *LimitError.
func (cn *conn) call1(ctx context.Context, method string, params, result any) error {
	params, err := withTraceContext(ctx, cn.rpc.Codec(), params)
	if err != nil {
		return fmt.Errorf("rpc: encode params of %s: %w", method, err)
	}
	err = cn.rpc.Call(ctx, method, params, result)
	if errors.Is(err, rpc.ErrClosed) {
		return cn.lost()
	}
	return asLimitError(err)
}

// lost is ErrConnectionLost with why the connection ended.
func (cn *conn) lost() error {
	if err := cn.err(); err != nil {
		return fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	return ErrConnectionLost
}

// done is closed when the connection has ended.
func (cn *conn) done() <-chan struct{} { return cn.rpc.Done() }

// err says why the connection ended, or nil while it runs.
func (cn *conn) err() error {
	cn.mu.Lock()
	cause := cn.cause
	cn.mu.Unlock()
	if cause != nil {
		return cause
	}
	return cn.rpc.Err()
}

// die ends the connection at once for cause (the first cause wins).
func (cn *conn) die(cause error) {
	cn.mu.Lock()
	if cn.cause == nil {
		cn.cause = cause
	}
	cn.mu.Unlock()
	cn.drop()
}

// drop ends the carrier at once: the WebSocket without a close handshake, or every POST.
func (cn *conn) drop() {
	if cn.ht != nil {
		_ = cn.ht.Close()
		return
	}
	_ = cn.ws.CloseNow()
}

// closeNormal ends the connection with a close handshake (1000), or
// drops it when the server does not answer within closeGrace.
func (cn *conn) closeNormal() {
	cn.mu.Lock()
	if cn.cause == nil {
		cn.cause = ErrClosed
	}
	cn.mu.Unlock()
	if cn.ht != nil {
		// Closing its requests ends each open response on the server.
		cn.drop()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cn.ws.Close(websocket.StatusNormalClosure, "")
	}()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		cn.cancel() // ends the reader, which closes the socket
		<-done
	}
}

// shutdown stops everything the connection runs and waits for it.
func (cn *conn) shutdown() {
	cn.cancel()
	cn.drop()
	_ = cn.rpc.Close()
	cn.wg.Wait()
	if cn.ht != nil {
		cn.ht.wait()
	}
}

// keepalive sends heartbeats and ends the connection after three silent
// intervals. Any frame from the server counts as a sign of life.
func (cn *conn) keepalive() {
	defer cn.wg.Done()
	iv, silence := cn.beat, cn.silence
	tick := time.NewTicker(max(iv/4, time.Millisecond))
	defer tick.Stop()
	lastSent := time.Now()
	for {
		select {
		case <-cn.done():
			return
		case now := <-tick.C:
			if now.Sub(time.Unix(0, cn.lastRecv.Load())) >= 3*silence {
				cn.c.log.Info("heartbeat timeout: reconnecting", "silent", now.Sub(time.Unix(0, cn.lastRecv.Load())))
				cn.die(ErrHeartbeatTimeout)
				return
			}
			if now.Sub(lastSent) >= iv {
				lastSent = now
				ctx, cancel := context.WithTimeout(cn.ctx, iv)
				_ = cn.rpc.Notify(ctx, protocol.Heartbeat, protocol.HeartbeatParams{Time: now.UnixMilli()})
				cancel()
			}
		}
	}
}

// refreshLoop sends auth.refresh at 80 % of each token's lifetime, measured
// from when its auth or auth.refresh was sent to its expires_at.
func (cn *conn) refreshLoop(issued, exp time.Time) {
	defer cn.wg.Done()
	t := time.NewTimer(refreshDelay(issued, exp, time.Now()))
	defer t.Stop()
	for {
		select {
		case <-cn.done():
			return
		case <-t.C:
		}
		sent := time.Now()
		ar, err := cn.refresh()
		switch {
		case err == nil:
			issued, exp = sent, time.Unix(ar.ExpiresAt, 0)
		case cn.err() != nil:
			return
		default:
			// Try again before expiry; if every attempt fails, the server
			// closes the connection with 4001 and the client reconnects.
			cn.c.log.Warn("auth.refresh failed", "err", err, "expires_at", exp)
			issued = sent
		}
		t.Reset(refreshDelay(issued, exp, time.Now()))
	}
}

func (cn *conn) refresh() (protocol.AuthResult, error) {
	ctx, cancel := context.WithTimeout(cn.ctx, cn.c.o.ConnectTimeout)
	defer cancel()
	var ar protocol.AuthResult
	tok, err := cn.c.o.Token(ctx)
	if err != nil {
		return ar, fmt.Errorf("client: token: %w", err)
	}
	err = cn.call(ctx, protocol.AuthRefresh, protocol.AuthParams{Token: tok}, &ar)
	if err == nil && ar.Limits != nil {
		cn.c.setLimits(cn, limitsOf(ar.Limits))
	}
	return ar, err
}

// refreshDelay is the wait until 80 % of the span from issued to exp has
// passed, and at least minRefresh.
func refreshDelay(issued, exp, now time.Time) time.Duration {
	at := issued.Add(exp.Sub(issued) * 4 / 5)
	return max(at.Sub(now), minRefresh)
}
