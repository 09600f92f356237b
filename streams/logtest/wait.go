package logtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
)

func testWaitWakes(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	head := mustAppend(t, a, ev("WEB", "t", "item", "x", "WEB-1"))
	woken := make(chan error, 1)
	go func() {
		for {
			// Wake-ups may be spurious: wait again until the head moved.
			if err := l.Wait(ctx, head); err != nil {
				woken <- err
				return
			}
			h, err := l.Head(ctx)
			if err != nil {
				woken <- err
				return
			}
			if h > head {
				woken <- nil
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // most likely blocked in Wait by now; either way is valid
	mustAppend(t, a, ev("WEB", "t", "item", "y", "WEB-1"))
	if err := <-woken; err != nil {
		t.Fatalf("Wait = %v", err)
	}
}

func testWaitBehind(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	last := mustAppend(t, a, ev("WEB", "t", "item", "x", "WEB-1"))
	// A waiter that has not read up to the head must not block (ctx would end the test).
	if err := l.Wait(ctx, last-1); err != nil {
		t.Fatalf("Wait(behind head) = %v", err)
	}
	if err := l.Wait(ctx, 0); err != nil {
		t.Fatalf("Wait(0) = %v", err)
	}
}

func testWaitCtx(t *testing.T, l streams.Log, _ streams.Appender) {
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		for {
			err := l.Wait(ctx, 0)
			if err != nil {
				done <- err
				return
			}
		}
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
	}
	dctx, dcancel := context.WithTimeout(ctxT(t), 20*time.Millisecond)
	defer dcancel()
	for {
		err := l.Wait(dctx, 0)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("Wait with deadline = %v", err)
		}
	}
}

func testClose(t *testing.T, l streams.Log, a streams.Appender) {
	c, ok := l.(interface{ Close() error })
	if !ok {
		return // nothing to close
	}
	ctx := ctxT(t)
	ended := make(chan error, 1)
	go func() {
		for {
			if err := l.Wait(ctx, 0); err != nil {
				ended <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("Wait across Close = %v, want ErrClosed", err)
	}
	if err := l.Wait(ctx, 0); !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	// Reads and appends do not depend on Close.
	if _, err := a.Append(ctx, ev("WEB", "t", "item", "x", "WEB-1")); err != nil {
		t.Fatalf("Append after Close = %v", err)
	}
	if evs, err := l.ReadAfter(ctx, 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("ReadAfter after Close = %d events, %v", len(evs), err)
	}
}
