package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// serveRaw runs a Conn speaking sc over a pipe and returns the other end,
// for hand-written frames.
func serveRaw(t *testing.T, sc codec.Codec, h Handler) (*PipeEnd, *Conn) {
	a, b := NewPipe(16)
	s := NewConn(a, sc, &Options{Handler: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Start(context.Background())
	t.Cleanup(func() { a.Close(); s.Close() })
	return b, s
}

func request(t *testing.T, p *PipeEnd, c codec.Codec, id int64, method string) *codec.Message {
	t.Helper()
	frame, err := c.Encode(nil, &codec.Message{ID: id, HasID: true, Method: method})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(context.Background(), frame); err != nil {
		t.Fatal(err)
	}
	return readMsg(t, p, c)
}

func wantInternal(t *testing.T, name string, m *codec.Message, id int64) {
	t.Helper()
	if !m.HasID || m.ID != id || m.Error == nil || m.Error.Code != -32603 || m.Error.Message != "internal error" || m.Error.Data != nil {
		t.Errorf("%s: got %+v %+v, want -32603 \"internal error\" for id %d", name, m, m.Error, id)
	}
}

// A result the codec cannot encode is answered with -32603, never left
// without an answer.
func TestUnencodableResultIsInternalError(t *testing.T) {
	results := map[string]any{
		"channel": make(chan int),
		"func":    func() {},
		"complex": complex(1, 2),
		"nested":  map[string]any{"ok": 1, "bad": []any{make(chan int)}},
		"NaN":     math.NaN(), // JSON has no NaN; MessagePack has
	}
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		p, _ := serveRaw(t, c, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			if r.Method == "fine" {
				return map[string]int{"n": 1}, nil
			}
			return results[r.Method], nil
		}))
		var id int64
		for name, v := range results {
			id++
			m := request(t, p, c, id, name)
			if _, err := c.Marshal(v); err == nil {
				if m.ID != id || m.Error != nil {
					t.Errorf("%s: %+v %+v, want the result", name, m, m.Error)
				}
				continue
			}
			wantInternal(t, name, m, id)
		}
		if m := request(t, p, c, 100, "fine"); m.ID != 100 || m.Error != nil {
			t.Fatalf("after the failures: %+v %+v", m, m.Error)
		}
	})
}

// An error whose data cannot be encoded keeps its code and message.
func TestUnencodableErrorDataIsLeftOut(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		p, _ := serveRaw(t, c, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			return nil, &Error{Code: -32029, Message: "limit exceeded", Data: map[string]any{"retry": make(chan int)}}
		}))
		m := request(t, p, c, 7, "x")
		if m.ID != 7 || m.Error == nil || m.Error.Code != -32029 || m.Error.Message != "limit exceeded" || m.Error.Data != nil {
			t.Fatalf("got %+v %+v", m, m.Error)
		}
	})
}

// failingCodec fails to encode the messages fail picks.
type failingCodec struct {
	codec.Codec
	fail func(m *codec.Message) bool
}

func (f failingCodec) Encode(dst []byte, m *codec.Message) ([]byte, error) {
	if f.fail(m) {
		return dst, errors.New("encoder broke")
	}
	return f.Codec.Encode(dst, m)
}

// A response the codec cannot encode becomes a bare -32603; when not even
// that can be encoded the connection ends, so the peer does not wait for ever.
func TestUnencodableResponse(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			if r.Method == "err" {
				return nil, Errorf(apiCode(-32004), "no such thing")
			}
			return "a result", nil
		})
		results := failingCodec{c, func(m *codec.Message) bool { return m.Result != nil }}
		p, _ := serveRaw(t, results, h)
		wantInternal(t, "result", request(t, p, c, 3, "ok"), 3)
		if m := request(t, p, c, 4, "err"); m.ID != 4 || m.Error == nil || m.Error.Code != -32004 {
			t.Fatalf("error response: %+v %+v", m, m.Error)
		}

		responses := failingCodec{c, func(m *codec.Message) bool { return m.Method == "" }}
		p, s := serveRaw(t, responses, h)
		frame, _ := c.Encode(nil, &codec.Message{ID: 5, HasID: true, Method: "ok"})
		if err := p.Write(context.Background(), frame); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("a response that cannot be encoded at all left the connection running")
		}
		if err := s.Err(); err == nil || errors.Is(err, ErrClosed) {
			t.Fatalf("Err = %v, want the encoding failure", err)
		}
	})
}
