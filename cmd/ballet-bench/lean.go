package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// wsConn is what a client needs of its WebSocket: the next data message into a reused buffer,
// a message written, and an end without a handshake.
type wsConn interface {
	readMessage(buf []byte) ([]byte, error)
	write(ctx context.Context, msg []byte) error
	closeNow() error
}

// libraryConn is a wsConn of coder/websocket: a reader and its locks per message.
type libraryConn struct {
	ws  *websocket.Conn
	typ websocket.MessageType
}

func (l *libraryConn) readMessage(buf []byte) ([]byte, error) {
	_, r, err := l.ws.Reader(context.Background())
	if err != nil {
		return buf, err
	}
	return readFrame(buf, r)
}

func (l *libraryConn) write(ctx context.Context, msg []byte) error {
	return l.ws.Write(ctx, l.typ, msg)
}

func (l *libraryConn) closeNow() error { return l.ws.CloseNow() }

// leanConn is a wsConn with nothing but what a benchmark client needs (RFC 6455's client
// side): the server's frames are read from one buffered reader into the caller's buffer, with
// no allocation or lock per message, pings are answered, and a close frame ends the reading
// with its code. A burst of small messages then costs the benchmark's process little, so that
// on a machine it shares with the server the server's speed, not the client's, is measured.
type leanConn struct {
	nc    net.Conn
	br    *bufio.Reader
	op    byte  // the data frames' opcode
	limit int64 // the longest message read

	wmu  sync.Mutex
	wbuf []byte
}

// closeError is the end of a lean connection's reading by the server's close frame.
type closeError struct{ code int }

func (e *closeError) Error() string {
	return fmt.Sprintf("the server closed the connection: %d", e.code)
}

// wsGUID is RFC 6455's key suffix.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// dialLean makes the opening handshake for subprotocol over a connection dial makes to u.
func dialLean(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	u, subprotocol string, binary bool, limit int64) (*leanConn, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	nc, err := dial(ctx, "tcp", pu.Host)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req := "GET " + pu.RequestURI() + " HTTP/1.1\r\nHost: " + pu.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " + subprotocol + "\r\n\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		nc.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		nc.Close()
		return nil, err
	}
	resp.Body.Close()
	sum := sha1.Sum([]byte(key + wsGUID))
	switch {
	case resp.StatusCode != http.StatusSwitchingProtocols:
		err = fmt.Errorf("handshake: %s", resp.Status)
	case resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]):
		err = errors.New("handshake: a wrong Sec-WebSocket-Accept")
	case resp.Header.Get("Sec-WebSocket-Protocol") != subprotocol:
		err = fmt.Errorf("the server did not accept subprotocol %s", subprotocol)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	c := &leanConn{nc: nc, br: br, op: 0x1, limit: limit}
	if binary {
		c.op = 0x2
	}
	return c, nil
}

// readMessage appends the next data message to buf[:0], answering pings meanwhile.
func (c *leanConn) readMessage(buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return buf, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0f
		if h[1]&0x80 != 0 {
			return buf, errors.New("a masked frame from the server")
		}
		n := int64(h[1] & 0x7f)
		switch n {
		case 126, 127:
			var x [8]byte
			l := 2
			if n == 127 {
				l = 8
			}
			if _, err := io.ReadFull(c.br, x[8-l:]); err != nil {
				return buf, err
			}
			n = int64(binary.BigEndian.Uint64(x[:]))
		}
		if n < 0 || int64(len(buf))+n > c.limit {
			return buf, fmt.Errorf("a message of more than %d bytes", c.limit)
		}
		start := len(buf)
		if need := start + int(n); need > cap(buf) {
			buf = append(buf[:cap(buf)], make([]byte, need-cap(buf))...)
		}
		buf = buf[:start+int(n)]
		if _, err := io.ReadFull(c.br, buf[start:]); err != nil {
			return buf, err
		}
		switch op {
		case 0x0, 0x1, 0x2:
			if fin {
				return buf, nil
			}
			continue
		case 0x9:
			err := c.writeFrame(0xa, buf[start:])
			buf = buf[:start]
			if err != nil {
				return buf, err
			}
		case 0xa:
			buf = buf[:start]
		case 0x8:
			code := 1005
			if n >= 2 {
				code = int(binary.BigEndian.Uint16(buf[start:]))
			}
			return buf[:start], &closeError{code: code}
		default:
			return buf, fmt.Errorf("an unknown opcode %d", op)
		}
	}
}

// write writes msg in one masked data frame.
func (c *leanConn) write(ctx context.Context, msg []byte) error {
	if dl, ok := ctx.Deadline(); ok {
		c.wmu.Lock()
		_ = c.nc.SetWriteDeadline(dl)
		c.wmu.Unlock()
	}
	return c.writeFrame(c.op, msg)
}

// writeFrame writes one final frame of opcode op, masked as a client's frames are.
func (c *leanConn) writeFrame(op byte, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := append(c.wbuf[:0], 0x80|op)
	switch n := len(p); {
	case n <= 125:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var m [4]byte
	_, _ = rand.Read(m[:])
	b = append(b, m[:]...)
	at := len(b)
	b = append(b, p...)
	for i := range p {
		b[at+i] ^= m[i&3]
	}
	c.wbuf = b
	_, err := c.nc.Write(b)
	return err
}

func (c *leanConn) closeNow() error { return c.nc.Close() }
