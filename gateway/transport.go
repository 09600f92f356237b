package gateway

import (
	"context"
	"errors"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/rpc"
)

// errWrongFrameKind ends a session whose client sent a frame of the other codec's kind.
var errWrongFrameKind = errors.New("gateway: frame kind does not match the subprotocol")

// wsTransport carries one JSON-RPC message per WebSocket frame.
type wsTransport struct {
	ws     *websocket.Conn
	typ    websocket.MessageType
	cork   *corkConn // the hijacked connection, for batched writes
	onKind func()    // called when a frame of the wrong kind arrives
}

var (
	_ rpc.Transport = (*wsTransport)(nil)
	_ rpc.Batcher   = (*wsTransport)(nil)
)

// Close ends the connection as the rpc.Conn ends. Usually the close
// handshake has happened already and this returns at once. When the
// WebSocket library has sent a close frame itself (a frame over the read
// limit: 1009), it waits for the peer's close so that the peer reads that
// code rather than a reset.
func (t *wsTransport) Close() error {
	return t.ws.Close(websocket.StatusGoingAway, "")
}

// Cork gathers the frames written until Uncork into one write.
func (t *wsTransport) Cork() { t.cork.Cork() }

// Uncork writes the gathered frames.
func (t *wsTransport) Uncork() error { return t.cork.Uncork() }

// Read ignores ctx: a cancellable context costs the WebSocket library a
// registration per read. The rpc.Conn closes the transport as it ends,
// which ends a pending read (io.Closer).
func (t *wsTransport) Read(_ context.Context) ([]byte, error) {
	typ, data, err := t.ws.Read(context.Background())
	if err != nil {
		return nil, err
	}
	if typ != t.typ {
		t.onKind()
		// Close here, before the read's context ends the connection abruptly.
		_ = t.ws.Close(websocket.StatusUnsupportedData, "frame kind does not match the subprotocol")
		return nil, errWrongFrameKind
	}
	return data, nil
}

func (t *wsTransport) Write(ctx context.Context, frame []byte) error {
	return t.ws.Write(ctx, t.typ, frame)
}
