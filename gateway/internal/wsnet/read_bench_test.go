package wsnet

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway/internal/wsframe"
)

// loopConn is a memConn whose input never ends: it reads frames over and over.
type loopConn struct {
	memConn
	frames []byte
}

func (c *loopConn) Read(p []byte) (int, error) {
	if c.in.Len() == 0 {
		c.in.Reset(c.frames)
	}
	return c.memConn.Read(p)
}

// benchRead reads messages framed as frames, over and over.
func benchRead(b *testing.B, msg []byte, op wsframe.Opcode, frag int) {
	frames := clientFrames(msg, op, frag, [4]byte{1, 2, 3, 4})
	lc := &loopConn{memConn: memConn{in: bytes.NewReader(frames)}, frames: frames}
	t := newTransport(lc, time.Second, &partialBudget{max: 256 << 20}) // as a server's
	t.Attach(&owner{}, op == wsframe.OpBinary, 1<<20)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.Read(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	small := []byte(`{"jsonrpc":"2.0","id":7,"method":"system.ping","params":{}}`)
	text := []byte(strings.Repeat("héllo wörld ", 2000)) // 28 KB
	big := bytes.Repeat([]byte{0x5a}, 512<<10)
	b.Run("small", func(b *testing.B) { benchRead(b, small, wsframe.OpText, 0) })
	b.Run("text28K", func(b *testing.B) { benchRead(b, text, wsframe.OpText, 0) })
	b.Run("text28K/frag4K", func(b *testing.B) { benchRead(b, text, wsframe.OpText, 4<<10) })
	b.Run("binary512K", func(b *testing.B) { benchRead(b, big, wsframe.OpBinary, 0) })
	b.Run("binary512K/frag64K", func(b *testing.B) { benchRead(b, big, wsframe.OpBinary, 64<<10) })
}
