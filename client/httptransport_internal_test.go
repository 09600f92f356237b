package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/rpc"
)

// A response read faster than the connection takes its lines is read no further once the
// transport's queue is full: the server's writes block (TCP holds it back) rather than the
// client buffering without bound. Close ends the POSTs, also one held so, and wait returns.
func TestHTTPTransportHoldsTheServerBack(t *testing.T) {
	var written atomic.Int64
	line := fmt.Sprintf(`{"jsonrpc":"2.0","method":"stream.event","params":{"pad":%q}}`+"\n", strings.Repeat("p", 1000))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for r.Context().Err() == nil {
			n, err := w.Write([]byte(line))
			if err != nil {
				return
			}
			written.Add(int64(n))
		}
	}))
	t.Cleanup(srv.Close) // after the transport's end, which ends the handler's writes
	c := &Client{url: srv.URL, o: (&Options{Token: StaticToken("t")}).withDefaults()}
	tr := c.newHTTPTransport()
	t.Cleanup(func() {
		_ = tr.Close()
		tr.wait()
	})
	if err := tr.Write(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"presence.get","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	// Held: what the server wrote stops growing, far below what it would write.
	var last int64 = -1
	for deadline := time.Now().Add(30 * time.Second); ; {
		time.Sleep(300 * time.Millisecond)
		n := written.Load()
		if n == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server wrote %d bytes and goes on", n)
		}
		last = n
	}
	if len(tr.in) != httpQueue {
		t.Fatalf("%d lines queued, want the queue full (%d)", len(tr.in), httpQueue)
	}
	if last > 64<<20 {
		t.Fatalf("the server wrote %d bytes before it was held", last)
	}
	// Reading lets it go on.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for written.Load() <= last {
		if _, err := tr.Read(ctx); err != nil {
			t.Fatalf("the server stays held while the lines are read: %v", err)
		}
	}
	done := make(chan struct{})
	go func() {
		_ = tr.Close()
		tr.wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close left a POST running")
	}
	// The lines read before the end come first, then the end.
	var err error
	for n := 0; err == nil && n <= httpQueue; n++ {
		_, err = tr.Read(context.Background())
	}
	if !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}

func TestTokenExpiry(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	// {"alg":"none"}.{"sub":"a","exp":1790833600}.
	jwt := "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjoxNzkwODMzNjAwfQ.sig"
	if got := tokenExpiry(jwt, now); got != 1790833600 {
		t.Fatalf("exp %d", got)
	}
	if got := tokenExpiry("opaque", now); got != now.Add(unknownTokenLife).Unix() {
		t.Fatalf("an opaque token's expiry %d", got)
	}
}
