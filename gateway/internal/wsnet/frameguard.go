package wsnet

import (
	"errors"
	"sync/atomic"

	"github.com/coder/websocket"
)

// errFrameRefused ends a connection whose peer sent a frame header that RFC 6455 or the
// read limit refuses; Transport.Read tells its Owner the code frameGuard chose.
var errFrameRefused = errors.New("wsnet: frame refused at its header")

// frameGuard reads the peer's frame headers as their bytes pass to the WebSocket library, so
// that a frame is refused at its header rather than after its payload: a data frame that
// makes its message longer than the read limit closes 1009 at once (the library would read
// the payload up to the limit first), and a frame that is not masked 1002 (RFC 6455 §5.1; the
// library ends the connection without a close frame). It sees every byte once, in order: it
// is called by the connection's one reader.
type frameGuard struct {
	limit int64 // the longest message
	frameHeads
	msg     int64         // bytes of the current data message so far
	refused atomic.Uint32 // a refusal's index in refusals, once refused: every later read fails; read by Close and Read
}

// refusals are the close codes and reasons of refused frames, by frameGuard.refused.
var refusals = [...]struct {
	code   websocket.StatusCode
	reason string
}{
	refusedTooBig:   {websocket.StatusMessageTooBig, "message too big"},
	refusedUnmasked: {websocket.StatusProtocolError, "client frames must be masked"},
}

const (
	refusedTooBig = 1 + iota
	refusedUnmasked
)

// scan follows p, the next bytes read; an error when a header in it is refused.
func (g *frameGuard) scan(p []byte) error {
	if g.refused.Load() != 0 {
		return errFrameRefused
	}
	for len(p) > 0 {
		if p = g.step(p); g.hn == 0 {
			continue
		}
		if g.hn == 2 {
			if g.hdr[1]&0x80 == 0 {
				return g.fail(refusedUnmasked)
			}
			g.need = headerSize(g.hdr[1]) + 4 // and the mask
		}
		if g.hn < 2 || g.hn < g.need {
			continue
		}
		// Past 2^62 refused below, as a data frame, or by the library, as a control frame.
		n := int64(min(payloadLen(g.hdr[:]), 1<<62))
		g.hn, g.need, g.payload = 0, 0, n
		if op := g.hdr[0] & 0x0f; op < 8 { // a data frame: continuation, text or binary
			if op != 0 {
				g.msg = 0
			}
			if g.msg += n; g.msg > g.limit {
				return g.fail(refusedTooBig)
			}
		}
	}
	return nil
}

func (g *frameGuard) fail(why uint32) error {
	g.refused.Store(why)
	return errFrameRefused
}

// refusal is the close code and reason of the refused frame, 0 when none was.
func (g *frameGuard) refusal() (websocket.StatusCode, string) {
	if g == nil {
		return 0, ""
	}
	if why := g.refused.Load(); why != 0 {
		return refusals[why].code, refusals[why].reason
	}
	return 0, ""
}
