package rpc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// Every method is safe before Start and while it runs: a server may close
// a connection it has not started yet.
func TestMethodsConcurrentWithStart(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		for i := 0; i < 300; i++ {
			a, b := NewPipe(64)
			var dones atomic.Int32
			k := NewConn(a, c, &Options{Hooks: &hookFuncs{done: func(error) { dones.Add(1) }}})
			ops := []func(){
				func() { k.Start(context.Background()) },
				func() { _ = k.Close() },
				func() { k.Abort(errors.New("aborted")) },
				func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = k.Flush(ctx)
				},
				func() { k.TrySend([]byte(`{}`), nil) },
				func() { _ = k.Notify(context.Background(), "n", nil) },
				func() { _ = k.Err(); _ = k.Context() },
			}
			var wg sync.WaitGroup
			gate := make(chan struct{})
			for j := range ops {
				op := ops[(i+j)%len(ops)]
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					op()
				}()
			}
			close(gate)
			wg.Wait()
			select {
			case <-k.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("Close did not end the connection")
			}
			if k.Err() == nil {
				t.Fatal("no reason after the connection ended")
			}
			k.Wait()
			waitFor(t, "OnDone", func() bool { return dones.Load() == 1 })
			a.Close()
			b.Close()
		}
	})
}

// A connection closed before Start never runs: Start starts no reader,
// OnDone has run once, and the transport is closed.
func TestCloseBeforeStart(t *testing.T) {
	a, b := NewPipe(1)
	var dones atomic.Int32
	k := NewConn(a, codec.JSON, &Options{Hooks: &hookFuncs{done: func(error) { dones.Add(1) }}})
	if k.Err() != nil {
		t.Fatalf("Err before Start: %v", k.Err())
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	k.Start(context.Background())
	<-k.Done()
	if !errors.Is(k.Err(), ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", k.Err())
	}
	if err := k.Flush(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	waitFor(t, "OnDone", func() bool { return dones.Load() == 1 })
	if _, err := b.Read(context.Background()); !errors.Is(err, ErrPipeClosed) {
		t.Fatalf("transport not closed: %v", err)
	}
	k.Wait()
}

// Start's context ends the connection with its cause; a connection that
// ends first leaves nothing registered on it.
func TestStartContextEndsConn(t *testing.T) {
	a, _ := NewPipe(1)
	defer a.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	k := NewConn(a, codec.JSON, nil)
	k.Start(ctx)
	cause := errors.New("parent gone")
	cancel(cause)
	<-k.Done()
	if !errors.Is(k.Err(), cause) {
		t.Fatalf("Err = %v, want the parent's cause", k.Err())
	}
	k.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in time", what)
		}
		time.Sleep(time.Millisecond)
	}
}
