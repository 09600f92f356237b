package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/rpc"
)

// Transport is how a connection is carried: a WebSocket on GET /rpc, or streaming HTTP on
// POST /rpc (one POST per request, a subscription's response kept open), for networks whose
// proxies refuse WebSocket upgrades.
type Transport string

const (
	// TransportAuto dials a WebSocket, and when it does not open tries HTTP: an upgrade
	// answered with an HTTP status that is not a WebSocket one (400, 403, 404, 405, 426, 502,
	// …: a proxy in between), a connection reset or closed without an answer, an upgrade left
	// unanswered past Options.ConnectTimeout. The gateway's own refusals for load (503 and
	// 429) are waited out as they are with TransportWebSocket. When the connection over HTTP
	// is made, HTTP is kept for Options.WebSocketRetry; when it fails too, the attempt fails
	// with both errors, and the next one tries a WebSocket first again.
	TransportAuto Transport = ""
	// TransportWebSocket carries every connection over a WebSocket.
	TransportWebSocket Transport = "websocket"
	// TransportHTTP carries every connection over HTTP.
	TransportHTTP Transport = "http"
)

// Transport returns what the current connection, or the last one, is carried over:
// TransportWebSocket or TransportHTTP ("" before the first connection).
func (c *Client) Transport() Transport {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.transport
}

// carrier is what a connection runs over, dialled: a WebSocket or the HTTP transport.
type carrier struct {
	over     Transport
	ws       *websocket.Conn // over a WebSocket
	ht       *httpTransport  // over HTTP
	fellBack error           // over HTTP by TransportAuto: why the WebSocket did not open
}

// transport is the carrier's rpc.Transport and the codec it speaks.
func (k *carrier) transport(c *Client) (rpc.Transport, codec.Codec) {
	if k.ht != nil {
		return k.ht, codec.JSON
	}
	typ := websocket.MessageText
	if c.o.Codec.Binary() {
		typ = websocket.MessageBinary
	}
	return &wsTransport{ws: k.ws, typ: typ}, c.o.Codec
}

// dial makes the carrier of a new connection as Options.Transport says: with TransportAuto, a
// WebSocket unless HTTP is being kept (Client.connect tries HTTP when the WebSocket does not
// open).
func (c *Client) dial(ctx context.Context) (*carrier, error) {
	over := c.o.Transport
	if over == TransportAuto {
		c.mu.Lock()
		over = TransportWebSocket
		if time.Now().Before(c.wsAfter) {
			over = TransportHTTP
		}
		c.mu.Unlock()
	}
	if over == TransportHTTP {
		return &carrier{over: TransportHTTP, ht: c.newHTTPTransport()}, nil
	}
	ws, err := c.dialWebSocket(ctx)
	return &carrier{over: TransportWebSocket, ws: ws}, err
}

// fallsBack reports whether TransportAuto tries HTTP after err, a WebSocket dial's failure:
// anything but the gateway's own refusals for load (503, 429), which say to wait rather than
// to take another way; an address that does not resolve or where nothing listens, which
// HTTP would not reach either; a WebSocket that opened without the codec's subprotocol
// (ErrSubprotocol: nothing in between blocked it); and the caller's giving up (ctx done).
func (c *Client) fallsBack(ctx context.Context, err error) bool {
	var dns *net.DNSError
	if c.o.Transport != TransportAuto || ctx.Err() != nil || errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, ErrSubprotocol) {
		return false
	}
	var he *HandshakeError
	return !errors.As(err, &he) || (he.StatusCode != http.StatusServiceUnavailable && he.StatusCode != http.StatusTooManyRequests)
}

// dialWebSocket makes the WebSocket handshake. A handshake answered with an HTTP status is a
// *HandshakeError.
func (c *Client) dialWebSocket(ctx context.Context) (*websocket.Conn, error) {
	name := c.o.Codec.Name()
	ws, resp, err := websocket.Dial(ctx, c.url, &websocket.DialOptions{
		HTTPClient: c.o.HTTPClient, HTTPHeader: handshakeHeader(ctx, c.o.Header), Subprotocols: []string{name},
	})
	if err != nil {
		if resp != nil {
			// Also a 101 that is not a WebSocket's (no or a wrong accept key): something in between
			// answered, not the gateway.
			err = &HandshakeError{StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header, time.Now()), err: err}
		}
		return nil, fmt.Errorf("client: dial %s: %w", c.url, err)
	}
	if ws.Subprotocol() != name {
		_ = ws.CloseNow()
		return nil, fmt.Errorf("%w: %s offered", ErrSubprotocol, name)
	}
	ws.SetReadLimit(c.o.ReadLimit)
	return ws, nil
}

// noteTransport records what cn is carried over, and tells the log when that changed: once
// per switch.
func (c *Client) noteTransportLocked(cn *conn) {
	prev := c.transport
	c.transport = cn.over
	switch {
	case cn.fellBack != nil && prev != TransportHTTP:
		c.log.Info("the WebSocket did not open: the connection goes over HTTP", "err", cn.fellBack,
			"websocket_retry", c.o.WebSocketRetry)
	case cn.over == TransportWebSocket && prev == TransportHTTP:
		c.log.Info("the connection goes over a WebSocket again")
	}
}
