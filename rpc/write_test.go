package rpc

import (
	"context"
	"fmt"
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

func (e *stressEnd) TryWrite(frames [][]byte) (bool, error) {
	if e.chance(3) {
		return false, nil
	}
	e.enter()
	defer e.leave()
	for _, f := range frames {
		e.record(f)
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
	const senders, perSender = 8, 600
	e := &stressEnd{t: t}
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
	for _, f := range e.got {
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
