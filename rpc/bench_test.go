package rpc

import (
	"context"
	"testing"

	"github.com/ballet/gateway/codec"
)

// sinkEnd is a transport that takes every frame and keeps none; with try it takes them on
// the sender's goroutine (TryWriter).
type sinkEnd struct{}

func (sinkEnd) Read(ctx context.Context) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
func (sinkEnd) Write(context.Context, []byte) error      { return nil }

type trySinkEnd struct{ sinkEnd }

func (trySinkEnd) TryWrite([]Out) (bool, error) { return true, nil }

func benchConn(b *testing.B, t Transport) *Conn {
	c := NewConn(t, codec.JSON, nil)
	c.Start(context.Background())
	b.Cleanup(func() { c.Close() })
	return c
}

// The writer role's paths, one frame a call: taken on the sender's goroutine (direct),
// spliced there, and through the writer goroutine (queued).
func BenchmarkSend(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","method":"ev","params":{"seq":1}}`)
	params := []byte(`{"seq":1,"type":"item.updated"}`)
	b.Run("direct", func(b *testing.B) {
		c := benchConn(b, trySinkEnd{})
		b.ReportAllocs()
		for b.Loop() {
			c.TrySend(frame, nil)
		}
	})
	b.Run("direct-spliced", func(b *testing.B) {
		c := benchConn(b, trySinkEnd{})
		fs := []Frame{{Method: "stream.event", Sub: "s1", Params: params}}
		b.ReportAllocs()
		for b.Loop() {
			c.TrySendFrames(fs, 1, nil)
		}
	})
	b.Run("queued", func(b *testing.B) {
		c := benchConn(b, sinkEnd{})
		b.ReportAllocs()
		for b.Loop() {
			for !c.TrySend(frame, nil) { // MaxTrySend queued: let the writer catch up
				_ = c.Flush(context.Background())
			}
		}
		_ = c.Flush(context.Background())
	})
}
