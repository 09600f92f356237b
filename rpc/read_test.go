package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// parkEnd is a pipe end whose reader parks between messages; the other
// end (wakeEnd) resumes it as it writes or closes.
type parkEnd struct {
	*PipeEnd
	mu     sync.Mutex
	resume func()
	closed bool
	parks  atomic.Int64
}

func (p *parkEnd) Park(resume func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.in) > 0 {
		return false
	}
	p.resume = resume
	p.parks.Add(1)
	return true
}

func (p *parkEnd) wake() {
	p.mu.Lock()
	r := p.resume
	p.resume = nil
	p.mu.Unlock()
	if r != nil {
		r()
	}
}

func (p *parkEnd) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wake()
	return p.PipeEnd.Close()
}

type wakeEnd struct {
	*PipeEnd
	peer *parkEnd
}

func (w *wakeEnd) Write(ctx context.Context, frame []byte) error {
	err := w.PipeEnd.Write(ctx, frame)
	w.peer.wake()
	return err
}

func (w *wakeEnd) Close() error {
	err := w.PipeEnd.Close()
	w.peer.Close()
	return err
}

func TestParkedReader(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		a, b := NewPipe(16)
		pa := &parkEnd{PipeEnd: a}
		var mu sync.Mutex
		var notes []int
		s := NewConn(pa, c, &Options{Handler: HandlerFunc(func(_ context.Context, r *Request) (any, error) {
			var p echo
			if err := r.Decode(&p); err != nil {
				return nil, err
			}
			if r.Notification {
				mu.Lock()
				notes = append(notes, p.N)
				mu.Unlock()
				return nil, nil
			}
			return p, nil
		}), Hooks: &hookFuncs{inline: func(m string) bool { return m == "inline" }}})
		k := NewConn(&wakeEnd{PipeEnd: b, peer: pa}, c, nil)
		ctx := context.Background()
		s.Start(ctx)
		k.Start(ctx)
		for i := range 200 {
			method := "echo"
			if i%3 == 0 {
				method = "inline"
			}
			var got echo
			if err := k.Call(ctx, method, echo{N: i}, &got); err != nil || got.N != i {
				t.Fatalf("call %d: %v %+v", i, err, got)
			}
			if err := k.Notify(ctx, "note", echo{N: i}); err != nil {
				t.Fatal(err)
			}
			if i%10 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		var got echo
		if err := k.Call(ctx, "echo", echo{N: -1}, &got); err != nil {
			t.Fatal(err)
		}
		if n := pa.parks.Load(); n < 100 {
			t.Errorf("the reader parked %d times in 200 round trips", n)
		}
		mu.Lock()
		for i, n := range notes {
			if n != i {
				t.Fatalf("notification %d arrived as %d: %v", i, n, notes)
			}
		}
		if len(notes) != 200 {
			t.Errorf("%d notifications of 200", len(notes))
		}
		mu.Unlock()
		// The peer closing ends a parked reader.
		k.Close()
		select {
		case <-s.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("a parked connection did not end when its peer closed")
		}
		s.Close()
	})
}

func TestCloseEndsParkedReader(t *testing.T) {
	a, b := NewPipe(16)
	pa := &parkEnd{PipeEnd: a}
	s := NewConn(pa, codec.JSON, nil)
	s.Start(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for pa.parks.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if pa.parks.Load() == 0 {
		t.Fatal("the reader never parked")
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return for a parked connection")
	}
	b.Close()
}
