package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// Client is a connection to the realtime API that survives disconnects. It
// is safe for concurrent use.
type Client struct {
	url string
	o   Options
	log *slog.Logger

	ctx       context.Context // ends with Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the manager goroutine
	closing   chan struct{}
	closeOnce sync.Once
	kickC     chan struct{} // wakes the manager: restore or unsubscribe work

	stateMu sync.Mutex // serializes OnStateChange

	mu      sync.Mutex
	state   State
	closed  bool
	failed  error         // why the client gave up (StateFailed); nil after Close
	cur     *conn         // nil while disconnected
	ready   chan struct{} // closed when cur is set
	gen     uint64
	subject string
	limits  Limits
	// transport carries the current (or last) connection; wsAfter is when TransportAuto
	// tries a WebSocket again after one that did not open.
	transport Transport
	wsAfter   time.Time
	subs      map[string]entry
	orphans   []orphan
	nextID    uint64
}

// entry is one id of the connection's subscription namespace: a stream
// subscription or a planner watch.
type entry interface {
	// restore subscribes again on cn; it returns only connection errors and
	// ends the entry itself on any other.
	restore(ctx context.Context, cn *conn) error
	needsRestore(gen uint64) bool
	serverClosed(gen uint64, reason string)
	// end closes the feed and returns the connection the server still
	// serves the subscription on (0 for none).
	end(err error) uint64
}

// orphan is a subscription the client dropped while the server still had it.
type orphan struct {
	id  string
	gen uint64
}

// Dial connects to url (ws:// or wss://, the gateway's /rpc; over HTTP the
// same address with http:// or https://) and authenticates. It returns the first connection's error, such as a refused
// token (errors.Is(err, protocol.ErrUnauthenticated)); once it has returned a
// Client, later disconnects are repaired in the background until Close. ctx
// bounds this first connection only.
func Dial(ctx context.Context, url string, opts *Options) (*Client, error) {
	if opts == nil || opts.Token == nil {
		return nil, errors.New("client: Options.Token is required")
	}
	o := opts.withDefaults()
	c := &Client{
		url: url, o: o, log: o.Logger,
		closing: make(chan struct{}),
		kickC:   make(chan struct{}, 1),
		ready:   make(chan struct{}),
		subs:    make(map[string]entry),
		gen:     1,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.setState(StateConnecting, nil)
	cn, err := c.connect(ctx, 1)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.setCurrent(cn)
	c.wg.Add(1)
	go c.run(cn)
	return c, nil
}

// Close ends the connection with a normal closure, stops reconnecting, and
// ends every subscription with ErrClosed. It waits for the client's
// goroutines and is safe to call more than once.
func (c *Client) Close() error {
	c.shut(StateClosed, nil, true)
	return nil
}

// Err is why the client gave up reconnecting (StateFailed): an error matching ErrClosed and
// protocol.ErrUnauthenticated; nil otherwise.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// fail gives up: the client ends as Close ends it, in StateFailed, and its calls and
// subscriptions end with cause wrapped in ErrClosed. It runs on the manager goroutine, which
// returns after it.
func (c *Client) fail(cause error) {
	c.log.Warn("the server refuses this client's token: no more reconnects", "err", cause,
		"attempts", c.o.AuthRetries)
	c.shut(StateFailed, fmt.Errorf("%w: the token was refused %d times in a row: %w", ErrClosed, c.o.AuthRetries, cause), false)
}

// shut ends the client in state: err, when set, is what the calls and subscriptions end with
// instead of ErrClosed. wait waits for the manager goroutine before the subscriptions end (the
// manager itself, giving up, does not).
func (c *Client) shut(state State, err error, wait bool) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.failed = err
		cur := c.cur
		c.mu.Unlock()
		if cur != nil {
			cur.closeNormal()
		}
		close(c.closing)
		c.cancel()
		if wait {
			c.wg.Wait()
		}
		c.mu.Lock()
		subs := c.subs
		c.subs = map[string]entry{}
		c.mu.Unlock()
		for _, e := range subs {
			e.end(c.errClosed())
		}
		c.stateMu.Lock()
		c.mu.Lock()
		c.state = state
		c.mu.Unlock()
		c.o.OnStateChange(state, err)
		c.stateMu.Unlock()
	})
}

// errClosed is what a call on the closed client fails with: ErrClosed, or why it gave up.
func (c *Client) errClosed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return c.failed
	}
	return ErrClosed
}

// State returns the current connection state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Subject returns the authenticated subject (from the auth result).
func (c *Client) Subject() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subject
}

func (c *Client) setState(s State, err error) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.mu.Lock()
	if c.state == StateClosed || c.state == StateFailed {
		c.mu.Unlock()
		return
	}
	c.state = s
	c.mu.Unlock()
	c.o.OnStateChange(s, err)
}

// setCurrent publishes cn for calls; false when the client closed meanwhile.
func (c *Client) setCurrent(cn *conn) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.cur = cn
	c.subject = cn.subject
	c.limits = cn.limits
	c.noteTransportLocked(cn)
	close(c.ready)
	c.mu.Unlock()
	c.setState(StateConnected, nil)
	return true
}

// setLimits records limits advertised again on cn (by auth.refresh).
func (c *Client) setLimits(cn *conn, l Limits) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == cn {
		c.limits = l
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// kick wakes the manager to restore subscriptions and drop orphans.
func (c *Client) kick() {
	select {
	case c.kickC <- struct{}{}:
	default:
	}
}

// run is the manager: it serves a connection until it ends, then reconnects.
func (c *Client) run(cn *conn) {
	defer c.wg.Done()
	b := &backoff{min: c.o.MinBackoff, max: c.o.MaxBackoff}
	for {
		since := time.Now()
		err := c.serve(cn)
		c.mu.Lock()
		c.cur = nil
		c.ready = make(chan struct{})
		closed := c.closed
		c.mu.Unlock()
		cn.shutdown()
		if closed {
			return
		}
		c.log.Info("connection lost: reconnecting", "err", err)
		c.setState(StateReconnecting, err)
		if time.Since(since) >= c.o.MaxBackoff {
			// The connection was stable: start again from MinBackoff. A
			// server that drops every connection at once sees the delays
			// keep growing.
			b.attempt = 0
		}
		if cn = c.reconnect(b, err); cn == nil {
			return
		}
	}
}

func (c *Client) serve(cn *conn) error {
	c.kick()
	for {
		select {
		case <-cn.done():
			return cn.err()
		case <-c.closing:
			return ErrClosed
		case <-c.kickC:
			c.dropOrphans(cn)
			c.restoreAll(cn)
		}
	}
}

// reconnect connects again with backoff after cause ended the last
// connection; nil when the client closed first.
func (c *Client) reconnect(b *backoff, cause error) *conn {
	refused := 0 // attempts in a row whose token the server refused
	for {
		t := time.NewTimer(c.reconnectDelay(b, cause))
		select {
		case <-c.closing:
			t.Stop()
			return nil
		case <-t.C:
		}
		c.mu.Lock()
		c.gen++
		gen := c.gen
		c.mu.Unlock()
		cn, err := c.connect(c.ctx, gen)
		if err == nil {
			if c.setCurrent(cn) {
				return cn
			}
			cn.shutdown()
			return nil
		}
		if c.isClosed() {
			return nil
		}
		if errors.Is(err, protocol.ErrUnauthenticated) {
			if refused++; c.o.AuthRetries > 0 && refused >= c.o.AuthRetries {
				c.fail(err)
				return nil
			}
		} else {
			refused = 0
		}
		c.log.Info("reconnect failed", "err", err)
		c.setState(StateReconnecting, err)
		cause = err
	}
}

// restoreAll subscribes again every entry not subscribed on cn, in the
// order they were created.
func (c *Client) restoreAll(cn *conn) {
	for _, e := range c.entries() {
		if !e.needsRestore(cn.gen) {
			continue
		}
		if err := e.restore(c.ctx, cn); err != nil {
			return // the connection is gone; the next one restores the rest
		}
	}
}

func (c *Client) entries() []entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]entry, 0, len(c.subs))
	for _, e := range c.subs {
		out = append(out, e)
	}
	return out
}

func (c *Client) dropOrphans(cn *conn) {
	c.mu.Lock()
	orphans := c.orphans
	c.orphans = nil
	c.mu.Unlock()
	for _, o := range orphans {
		if o.gen != cn.gen {
			continue // that connection, and the subscription with it, is gone
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.o.ConnectTimeout)
		err := cn.callPatient(ctx, protocol.StreamUnsubscribe, protocol.UnsubscribeParams{Subscription: o.id}, nil)
		cancel()
		if err != nil && !errors.Is(err, protocol.ErrNotFound) {
			c.log.Debug("stream.unsubscribe failed", "subscription", o.id, "err", err)
		}
	}
}

// newID returns a subscription id unused on this client.
func (c *Client) newID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	return fmt.Sprintf("s%d", c.nextID)
}

// register adds e under id, unless the client holds as many
// subscriptions as the server takes.
func (c *Client) register(id string, e entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.checkSubscriptionLimitLocked(); err != nil {
		return err
	}
	c.subs[id] = e
	return nil
}

// drop removes id if it still maps to e; it reports whether it did.
func (c *Client) drop(id string, e entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.subs[id]; !ok || cur != e {
		return false
	}
	delete(c.subs, id)
	return true
}

// abandon drops e, which the server still serves on connection gen, and
// has the manager unsubscribe it.
func (c *Client) abandon(id string, e entry, gen uint64) {
	if !c.drop(id, e) {
		return
	}
	if gen != 0 {
		c.mu.Lock()
		c.orphans = append(c.orphans, orphan{id: id, gen: gen})
		c.mu.Unlock()
		c.kick()
	}
}

func (c *Client) lookup(id string) entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[id]
}

// waitConn returns the current connection, waiting while the client
// reconnects.
func (c *Client) waitConn(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			err := c.failed
			c.mu.Unlock()
			if err == nil {
				err = ErrClosed
			}
			return nil, err
		}
		cn, ready := c.cur, c.ready
		c.mu.Unlock()
		if cn != nil {
			return cn, nil
		}
		select {
		case <-ready:
		case <-c.closing:
			return nil, c.errClosed()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Call sends a request with params and decodes its result into result
// (when non-nil). While the client is reconnecting it waits for the next
// connection, up to ctx. A call whose connection ends before the answer is
// not repeated: it fails with ErrConnectionLost. Errors from the server are
// *rpc.Error, matching the rpc.ErrXxx and protocol.ErrXxx codes.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	if err := c.call(ctx, method, params, result); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

func (c *Client) call(ctx context.Context, method string, params, result any) error {
	cn, err := c.waitConn(ctx)
	if err != nil {
		return err
	}
	err = cn.call(ctx, method, params, result)
	if errors.Is(err, ErrConnectionLost) && c.isClosed() {
		return c.errClosed()
	}
	return err
}

// Notify sends a notification, waiting for a connection like Call.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	cn, err := c.waitConn(ctx)
	if err != nil {
		return err
	}
	if err := cn.rpc.Notify(ctx, method, params); err != nil {
		if errors.Is(err, rpc.ErrClosed) {
			err = ErrConnectionLost
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// PingResult is the result of system.ping: the server's clock (Unix milliseconds) and the
// connection's subject.
type PingResult = protocol.PingResult

// Ping checks the connection end to end with system.ping.
func (c *Client) Ping(ctx context.Context) (PingResult, error) {
	var r PingResult
	err := c.Call(ctx, protocol.SystemPing, protocol.PingParams{}, &r)
	return r, err
}

// route serves what the server sends on cn.
func (c *Client) route(cn *conn, req *rpc.Request) (any, error) {
	switch req.Method {
	case protocol.Heartbeat:
		return nil, nil
	case protocol.StreamEvent:
		var ev protocol.EventParams
		if err := req.Decode(&ev); err != nil {
			return nil, err
		}
		if s, ok := c.lookup(ev.Subscription).(*Subscription); ok {
			s.deliver(cn.gen, eventOf(&ev))
		}
		return nil, nil
	case protocol.PresenceChanged:
		var ch protocol.PresenceChangedParams
		if err := req.Decode(&ch); err != nil {
			return nil, err
		}
		if s, ok := c.lookup(ch.Subscription).(*Subscription); ok && s.presence != nil {
			s.presence.apply(ch)
		}
		return nil, nil
	case protocol.PlannerOutput:
		var out protocol.OutputParams
		if err := req.Decode(&out); err != nil {
			return nil, err
		}
		if w, ok := c.lookup(out.Subscription).(*Watch); ok {
			w.deliver(cn.gen, outputOf(&out))
		}
		return nil, nil
	case protocol.StreamClosed:
		var p protocol.ClosedParams
		if err := req.Decode(&p); err != nil {
			return nil, err
		}
		if e := c.lookup(p.Subscription); e != nil {
			e.serverClosed(cn.gen, p.Reason)
		}
		return nil, nil
	}
	return nil, rpc.Errorf(rpc.ErrMethodNotFound, "method %s not found", req.Method)
}
