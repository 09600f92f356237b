package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The lean client reads what a library server writes: messages at every length its header
// encodes differently, a fragmented one, pings (which it answers) between them, and the close
// frame's code; and the server reads its masked messages.
func TestLeanClientReadsEveryFrame(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 65535, 65536, 200000}
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"ballet.v1.json"}})
		if err != nil {
			return
		}
		c.SetReadLimit(1 << 20)
		ctx := context.Background()
		defer c.CloseNow()
		go func() {
			// The client's message; then on reading, for the pongs.
			for first := true; ; first = false {
				_, m, err := c.Read(ctx)
				if err != nil {
					return
				}
				if first {
					got <- m
				}
			}
		}()
		for _, n := range sizes {
			if err := c.Write(ctx, websocket.MessageText, bytes.Repeat([]byte{'a' + byte(n%26)}, n)); err != nil {
				return
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Ping(pctx) // answered by the client's reader
			cancel()
			if err != nil {
				t.Errorf("ping after %d bytes: %v", n, err)
				return
			}
		}
		w2, err := c.Writer(ctx, websocket.MessageText)
		if err != nil {
			return
		}
		for _, part := range []string{"frag", "mented"} {
			_, _ = w2.Write([]byte(part))
		}
		_ = w2.Close()
		_ = c.Close(4001, "bye")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lc, err := dialLean(ctx, (&net.Dialer{}).DialContext, "ws"+strings.TrimPrefix(srv.URL, "http")+"/rpc",
		"ballet.v1.json", false, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.closeNow()
	if err := lc.write(ctx, []byte(`{"hello":1}`)); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for _, n := range sizes {
		if buf, err = lc.readMessage(buf); err != nil {
			t.Fatalf("message of %d bytes: %v", n, err)
		}
		if len(buf) != n || n > 0 && (buf[0] != 'a'+byte(n%26) || buf[n-1] != buf[0]) {
			t.Fatalf("message of %d bytes: got %d", n, len(buf))
		}
	}
	if buf, err = lc.readMessage(buf); err != nil || string(buf) != "fragmented" {
		t.Fatalf("fragmented message: %q, %v", buf, err)
	}
	_, err = lc.readMessage(buf)
	var ce *closeError
	if !errors.As(err, &ce) || ce.code != 4001 || closeCode(err) != 4001 {
		t.Fatalf("close: %v", err)
	}
	select {
	case m := <-got:
		if string(m) != `{"hello":1}` {
			t.Fatalf("the server read %q", m)
		}
	case <-ctx.Done():
		t.Fatal("the server did not read the client's message")
	}
}

// The lean client refuses a handshake that does not choose its subprotocol.
func TestLeanClientNeedsItsSubprotocol(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err == nil {
			c.CloseNow()
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := dialLean(ctx, (&net.Dialer{}).DialContext, "ws"+strings.TrimPrefix(srv.URL, "http"), "ballet.v1.json", false, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "subprotocol") {
		t.Fatalf("dial: %v", err)
	}
}
