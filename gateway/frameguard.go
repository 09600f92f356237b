package gateway

import (
	"encoding/binary"
	"errors"
	"sync/atomic"

	"github.com/coder/websocket"
)

// errFrameRefused ends a session whose peer sent a frame header that RFC 6455 or the read
// limit refuses; the session closes with the code frameGuard chose.
var errFrameRefused = errors.New("gateway: frame refused at its header")

// frameGuard reads the peer's frame headers as their bytes pass to the WebSocket library, so
// that a frame is refused at its header rather than after its payload: a data frame that
// makes its message longer than the read limit closes 1009 at once (the library would read
// the payload up to the limit first), and a frame that is not masked 1002 (RFC 6455 §5.1; the
// library ends the connection without a close frame). It sees every byte once, in order: it
// is called by the connection's one reader.
type frameGuard struct {
	sess    *session // closed with the code a refusal chooses; its BALLET_READ_LIMIT is the longest message
	hdr     [14]byte
	hn      uint8       // header bytes read
	need    uint8       // the header's length, once its second byte is read
	payload int64       // payload bytes of the current frame still to come
	msg     int64       // bytes of the current data message so far
	refused atomic.Bool // once refused, every later read fails; read by Close
}

// scan follows p, the next bytes read; an error when a header in it is refused.
func (g *frameGuard) scan(p []byte) error {
	if g.refused.Load() {
		return errFrameRefused
	}
	for len(p) > 0 {
		if g.payload > 0 {
			k := min(int64(len(p)), g.payload)
			g.payload -= k
			p = p[k:]
			continue
		}
		g.hdr[g.hn] = p[0]
		g.hn++
		p = p[1:]
		if g.hn == 2 {
			if g.hdr[1]&0x80 == 0 {
				return g.fail(websocket.StatusProtocolError, "client frames must be masked")
			}
			switch g.hdr[1] & 0x7f {
			case 126:
				g.need = 2 + 2 + 4
			case 127:
				g.need = 2 + 8 + 4
			default:
				g.need = 2 + 4
			}
		}
		if g.hn < 2 || g.hn < g.need {
			continue
		}
		var n int64
		switch l := g.hdr[1] & 0x7f; l {
		case 126:
			n = int64(binary.BigEndian.Uint16(g.hdr[2:4]))
		case 127:
			u := binary.BigEndian.Uint64(g.hdr[2:10])
			if u > 1<<62 {
				u = 1 << 62 // refused below, as a data frame, or by the library, as a control frame
			}
			n = int64(u)
		default:
			n = int64(l)
		}
		g.hn, g.need, g.payload = 0, 0, n
		if op := g.hdr[0] & 0x0f; op < 8 { // a data frame: continuation, text or binary
			if op != 0 {
				g.msg = 0
			}
			if g.msg += n; g.msg > int64(g.sess.srv.cfg.ReadLimit) {
				return g.fail(websocket.StatusMessageTooBig, "message too big")
			}
		}
	}
	return nil
}

func (g *frameGuard) fail(code websocket.StatusCode, reason string) error {
	g.refused.Store(true)
	g.sess.closeWith(code, reason)
	return errFrameRefused
}
