package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// stressEnd is a transport that takes frames on the sender's goroutine
// now and then (TryWriter), is sometimes slow to write, gathers batches
// (Batcher), and fails the test if two goroutines ever write at once.
type stressEnd struct {
	mu      sync.Mutex
	got     []string
	writing atomic.Bool
	rnd     atomic.Uint64
	t       *testing.T
}

func (e *stressEnd) enter() {
	if !e.writing.CompareAndSwap(false, true) {
		e.t.Error("two goroutines write to the transport at once")
	}
}

func (e *stressEnd) leave() { e.writing.Store(false) }

func (e *stressEnd) chance(n uint64) bool { return (e.rnd.Add(0x9e3779b97f4a7c15)>>33)%n == 0 }

func (e *stressEnd) Read(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (e *stressEnd) Write(_ context.Context, frame []byte) error {
	e.enter()
	defer e.leave()
	if e.chance(16) {
		time.Sleep(50 * time.Microsecond) // a slow peer, now and then
	}
	e.record(frame)
	return nil
}

func (e *stressEnd) TryWrite(frames []Out) (bool, error) {
	if e.chance(3) {
		return false, nil
	}
	e.enter()
	defer e.leave()
	for _, f := range frames {
		e.record(joined(f))
	}
	return true, nil
}

func (e *stressEnd) Cork()         {}
func (e *stressEnd) Uncork() error { return nil }

func (e *stressEnd) record(frame []byte) {
	var m codec.Message
	if err := codec.JSON.Decode(frame, &m); err != nil {
		e.t.Errorf("undecodable frame %q", frame)
		return
	}
	var p struct {
		Subscription string `json:"subscription"`
		Seq          int    `json:"seq"`
	}
	if err := codec.JSON.Unmarshal(m.Params, &p); err != nil {
		e.t.Errorf("params %q: %v", m.Params, err)
		return
	}
	e.mu.Lock()
	e.got = append(e.got, fmt.Sprintf("%s/%s/%d", m.Method, p.Subscription, p.Seq))
	e.mu.Unlock()
}

func (e *stressEnd) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

// TestWriterRoleStress: senders on many goroutines use every way of
// sending (TrySend, TrySendFrames with spliced frames, Notify, Flush)
// while the transport takes direct writes only now and then. The writer
// role passes between senders and writer goroutines: the transport is
// never written by two at once, each sender's frames arrive exactly once
// and in its order, and Flush returns only once the sender's earlier
// frames were written.
func TestWriterRoleStress(t *testing.T) {
	t.Run("cork", func(t *testing.T) { writerRoleStress(t, &stressEnd{t: t}) })
	// The writer's batches in vectored writes of messages (FramesWriter), as over a socket.
	t.Run("frames", func(t *testing.T) {
		e := &stressFramesEnd{stressEnd: stressEnd{t: t}}
		writerRoleStress(t, e)
		if e.writes.Load() == 0 {
			t.Fatal("the writer never wrote a batch with WriteFrames")
		}
	})
}

// stressFramesEnd is a stressEnd that also takes the writer's batches whole (FramesWriter),
// leaving each for the writer's Drain to finish.
type stressFramesEnd struct {
	stressEnd
	owed   atomic.Bool
	writes atomic.Int64 // WriteFrames calls
}

func (e *stressFramesEnd) Busy() bool { return e.owed.Load() }

func (e *stressFramesEnd) Drain() error {
	e.owed.Store(false)
	return nil
}

func (e *stressFramesEnd) WriteFrames(frames []Out) error {
	e.enter()
	defer e.leave()
	if e.chance(16) {
		time.Sleep(50 * time.Microsecond)
	}
	for _, f := range frames {
		e.record(joined(f))
	}
	e.owed.Store(true)
	e.writes.Add(1)
	return nil
}

// recorder is what writerRoleStress reads of its transport.
type recorder interface {
	Transport
	count() int
	has(sub string, n int) bool
	frames() []string
}

func (e *stressEnd) frames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func writerRoleStress(t *testing.T, e recorder) {
	const senders, perSender = 8, 600
	conn := NewConn(e, codec.JSON, &Options{MaxTrySend: senders * perSender})
	conn.Start(context.Background())
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 7))
			sub := fmt.Sprint("g", g)
			body := func(seq int) []byte {
				b, _ := codec.JSON.Marshal(map[string]int{"seq": seq})
				return b
			}
			for seq := 0; seq < perSender; {
				switch rnd.IntN(5) {
				case 0:
					frame, _ := codec.JSON.Encode(nil, &codec.Message{Method: "n", Params: []byte(fmt.Sprintf(`{"subscription":%q,"seq":%d}`, sub, seq))})
					if !conn.TrySend(frame, nil) {
						t.Errorf("TrySend %s %d refused", sub, seq)
						return
					}
					seq++
				case 1, 2:
					k := min(1+rnd.IntN(6), perSender-seq)
					fs := make([]Frame, k)
					for i := range fs {
						fs[i] = Frame{Method: "n", Sub: sub, Params: body(seq + i)}
					}
					if !conn.TrySendFrames(fs, k, nil) {
						t.Errorf("TrySendFrames %s %d refused", sub, seq)
						return
					}
					seq += k
				case 3:
					if err := conn.Notify(context.Background(), "n", map[string]any{"subscription": sub, "seq": seq}); err != nil {
						t.Errorf("Notify: %v", err)
						return
					}
					seq++
				case 4:
					before := seq
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := conn.Flush(ctx)
					cancel()
					if err != nil {
						t.Errorf("Flush: %v", err)
						return
					}
					if !e.has(sub, before) {
						t.Errorf("Flush of %s returned before frame %d was written", sub, before-1)
					}
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if n := e.count(); n != senders*perSender {
		t.Fatalf("%d frames written, want %d", n, senders*perSender)
	}
	next := map[string]int{}
	for _, f := range e.frames() {
		parts := strings.Split(f, "/")
		seq, _ := strconv.Atoi(parts[2])
		if seq != next[parts[1]] {
			t.Fatalf("%s: got seq %d, want %d", parts[1], seq, next[parts[1]])
		}
		next[parts[1]]++
	}
}

// has reports whether frames 0..n-1 of sub have all been written.
func (e *stressEnd) has(sub string, n int) bool {
	if n == 0 {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	want := fmt.Sprintf("n/%s/%d", sub, n-1)
	for _, f := range e.got {
		if f == want {
			return true
		}
	}
	return false
}

// gatedEnd is a pipe end whose writes wait for the test's go-ahead.
type gatedEnd struct {
	*PipeEnd
	gate chan struct{}
}

func (g *gatedEnd) Write(ctx context.Context, frame []byte) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.PipeEnd.Write(ctx, frame)
}

// Senders wait while OutQueue frames are queued, give up with their
// context, and go on once frames are written.
func TestOutQueueBoundsSenders(t *testing.T) {
	a, b := NewPipe(64)
	g := &gatedEnd{PipeEnd: a, gate: make(chan struct{})}
	c := NewConn(g, codec.JSON, &Options{OutQueue: 2})
	c.Start(context.Background())
	defer func() {
		c.Close()
		b.Close()
	}()
	ctx := context.Background()
	for i := range 2 { // frames queued or being written hold a token each
		if err := c.Notify(ctx, "n", i); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := c.Notify(short, "n", 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a sender past OutQueue got %v, want it to wait and time out", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Notify(ctx, "n", 4) }()
	select {
	case err := <-done:
		t.Fatalf("a sender past OutQueue returned %v before a frame was written", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.gate <- struct{}{}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting sender did not go on after a write")
	}
	close(g.gate)
	for range 3 {
		if _, err := b.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// tryEnd is a pipe end that takes frames on the sender's goroutine while
// accept is set (TryWriter), like a socket with room.
type tryEnd struct {
	*PipeEnd
	accept atomic.Bool
	tries  atomic.Int64 // TryWrite calls that wrote
}

func (e *tryEnd) TryWrite(frames []Out) (bool, error) {
	if !e.accept.Load() {
		return false, nil
	}
	e.tries.Add(1)
	for _, f := range frames {
		// The pipe keeps the slice: the caller reuses its buffer.
		if err := e.PipeEnd.Write(context.Background(), joined(f)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// Frames go out on the sender's goroutine while the transport takes them
// and through the writer while it does not, in the order they were sent;
// a batch goes out whole or not at all, and never beyond its room.
func TestTryWriterKeepsOrder(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		a, b := NewPipe(4096)
		e := &tryEnd{PipeEnd: a}
		conn := NewConn(e, c, nil)
		conn.Start(context.Background())
		defer func() {
			conn.Close()
			b.Close()
		}()
		body := func(n int) []byte {
			raw, err := c.Marshal(map[string]int{"n": n})
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		var done atomic.Int64
		count := func() { done.Add(1) }

		// Taken at once: written, and done, before the call returns.
		e.accept.Store(true)
		spliced := func(bodies ...[]byte) []Frame {
			fs := make([]Frame, len(bodies))
			for i, b := range bodies {
				fs[i] = Frame{Method: "ev", Sub: "s", Params: b}
			}
			return fs
		}
		if !conn.TrySendFrames(spliced(body(0)), 1, count) || done.Load() != 1 || e.tries.Load() != 1 {
			t.Fatalf("single frame: done %d, tries %d", done.Load(), e.tries.Load())
		}
		if !conn.TrySendFrames(spliced(body(1), body(2), body(3)), 3, count) || done.Load() != 4 || e.tries.Load() != 2 {
			t.Fatalf("batch: done %d, tries %d (want one write for the batch)", done.Load(), e.tries.Load())
		}
		// More than room: refused whole.
		if conn.TrySendFrames(spliced(body(-1), body(-1)), 1, count) {
			t.Fatal("a batch larger than its room was taken")
		}

		// The transport taking frames now and then: every frame arrives
		// once, in order, and every done is called.
		n := 4
		rnd := rand.New(rand.NewPCG(1, 2))
		for n < 2000 {
			e.accept.Store(rnd.IntN(3) != 0)
			if k := 1 + rnd.IntN(5); k > 1 {
				bodies := make([][]byte, k)
				for i := range bodies {
					bodies[i] = body(n + i)
				}
				if !conn.TrySendFrames(spliced(bodies...), k, count) {
					t.Fatalf("batch at %d refused", n)
				}
				n += k
			} else {
				if !conn.TrySendFrames(spliced(body(n)), 1, count) {
					t.Fatalf("frame %d refused", n)
				}
				n++
			}
		}
		for want := range n {
			frame, err := b.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var m codec.Message
			if err := c.Decode(frame, &m); err != nil {
				t.Fatal(err)
			}
			var p struct {
				Subscription string `json:"subscription"`
				N            int    `json:"n"`
			}
			if err := c.Unmarshal(m.Params, &p); err != nil {
				t.Fatal(err)
			}
			if m.Method != "ev" || p.Subscription != "s" || p.N != want {
				t.Fatalf("frame %d: %s %+v", want, m.Method, p)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for done.Load() != int64(n) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if done.Load() != int64(n) {
			t.Fatalf("done called %d times for %d frames", done.Load(), n)
		}
	})
}

func TestTrySendBoundedAndFlush(t *testing.T) {
	a, b := NewPipe(0) // nobody reads b: the writer blocks on the first frame
	k := NewConn(a, codec.JSON, &Options{MaxTrySend: 3})
	k.Start(context.Background())
	defer func() { a.Close(); k.Close() }()
	var written atomic.Int32
	ok := 0
	for i := 0; i < 10; i++ {
		if k.TrySend([]byte(`{}`), func() { written.Add(1) }) {
			ok++
		}
	}
	// One frame may already be in the writer's hands; at most 3 are queued.
	if ok < 3 || ok > 4 {
		t.Fatalf("TrySend accepted %d of 10 with MaxTrySend 3", ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := k.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush with a stuck peer: %v", err)
	}
	go func() {
		for {
			if _, err := b.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if err := k.Flush(ctx2); err != nil {
		t.Fatal(err)
	}
	if int(written.Load()) != ok {
		t.Fatalf("written %d of %d", written.Load(), ok)
	}
}

// A frame whose params cannot be spliced is dropped, and its done called, on the sender's
// goroutine and through the writer alike; the frames around it go out.
func TestSpliceFailureDropsTheFrame(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		for _, direct := range []bool{true, false} {
			a, b := NewPipe(4096)
			e := &tryEnd{PipeEnd: a}
			e.accept.Store(direct)
			conn := NewConn(e, c, &Options{Logger: slog.New(slog.DiscardHandler)})
			conn.Start(context.Background())
			body := func(v any) []byte {
				raw, err := c.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				return raw
			}
			var done atomic.Int64
			fs := []Frame{
				{Method: "ev", Sub: "s", Params: body(map[string]int{"n": 1})},
				{Method: "ev", Sub: "s", Params: body([]int{1})}, // not an object
				{Method: "ev", Sub: "s", Params: body(map[string]int{"n": 2})},
			}
			if !conn.TrySendFrames(fs, 3, func() { done.Add(1) }) {
				t.Fatal("frames refused")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			for want := 1; want <= 2; want++ {
				frame, err := b.Read(ctx)
				if err != nil {
					t.Fatalf("direct %v: frame %d: %v", direct, want, err)
				}
				var m codec.Message
				var p struct {
					N int `json:"n" msgpack:"n"`
				}
				if err := c.Decode(frame, &m); err != nil || c.Unmarshal(m.Params, &p) != nil || p.N != want {
					t.Fatalf("direct %v: got %q, want n %d", direct, frame, want)
				}
			}
			cancel()
			if err := conn.Flush(context.Background()); err != nil || done.Load() != 3 {
				t.Fatalf("direct %v: flush %v, done %d times, want 3", direct, err, done.Load())
			}
			conn.Close()
			b.Close()
		}
	})
}

// joined is the frame a message makes: a copy of its Head, Body and Tail, one after another.
func joined(o Out) []byte {
	return append(append(append([]byte(nil), o.Head...), o.Body...), o.Tail...)
}
