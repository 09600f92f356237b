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

// Cork gathers the frames written until Uncork into one write.
func (t *wsTransport) Cork() { t.cork.Cork() }

// Uncork writes the gathered frames.
func (t *wsTransport) Uncork() error { return t.cork.Uncork() }

func (t *wsTransport) Read(ctx context.Context) ([]byte, error) {
	typ, data, err := t.ws.Read(ctx)
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
