package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	// TransportAuto dials a WebSocket, and carries the connection over HTTP when the upgrade
	// gets an HTTP answer that is not a WebSocket one (400, 403, 404, 405, 426, 502, …: a proxy
	// in between) and is not the gateway's own refusal for load (503 and 429 are waited out as
	// they are with TransportWebSocket). HTTP is then kept for Options.WebSocketRetry.
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
	over    Transport
	ws      *websocket.Conn // over a WebSocket
	ht      *httpTransport  // over HTTP
	refusal error           // over HTTP by TransportAuto: the refused upgrade
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

// dial makes the carrier of a new connection as Options.Transport says.
func (c *Client) dial(ctx context.Context) (*carrier, error) {
	over := c.o.Transport
	if over == TransportAuto {
		c.mu.Lock()
		onHTTP := time.Now().Before(c.wsAfter)
		c.mu.Unlock()
		if !onHTTP {
			ws, err := c.dialWebSocket(ctx)
			if err == nil || !upgradeRefused(err) {
				return &carrier{over: TransportWebSocket, ws: ws}, err
			}
			c.mu.Lock()
			c.wsAfter = time.Now().Add(c.o.WebSocketRetry)
			c.mu.Unlock()
			return &carrier{over: TransportHTTP, ht: c.newHTTPTransport(), refusal: err}, nil
		}
	}
	if over == TransportHTTP || over == TransportAuto {
		return &carrier{over: TransportHTTP, ht: c.newHTTPTransport()}, nil
	}
	ws, err := c.dialWebSocket(ctx)
	return &carrier{over: TransportWebSocket, ws: ws}, err
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

// upgradeRefused reports whether a failed WebSocket dial had its upgrade refused by something
// between the client and the gateway: an HTTP answer other than the gateway's refusals for
// load (503, 429), which say to wait rather than to take another way.
func upgradeRefused(err error) bool {
	var he *HandshakeError
	if !errors.As(err, &he) {
		return false
	}
	return he.StatusCode != http.StatusServiceUnavailable && he.StatusCode != http.StatusTooManyRequests
}

// noteTransport records what cn is carried over, and tells the log when that changed: once
// per switch.
func (c *Client) noteTransportLocked(cn *conn) {
	prev := c.transport
	c.transport = cn.over
	switch {
	case cn.refusal != nil && prev != TransportHTTP:
		c.log.Info("the WebSocket upgrade was refused: the connection goes over HTTP", "err", cn.refusal,
			"websocket_retry", c.o.WebSocketRetry)
	case cn.over == TransportWebSocket && prev == TransportHTTP:
		c.log.Info("the connection goes over a WebSocket again")
	}
}
