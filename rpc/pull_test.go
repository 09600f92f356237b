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

// countSource is a Source of frames {"seq": n}, n from 0, of which add makes more available;
// it keeps itself in its connection's ready list as a subscription does: Ready once, until
// Pull reports no more.
type countSource struct {
	sub         string
	conn        *Conn
	mu          sync.Mutex
	next, avail int
	ready       atomic.Bool
	pulls       atomic.Int64
}

func (s *countSource) add(n int) {
	s.mu.Lock()
	s.avail += n
	s.mu.Unlock()
	if s.ready.CompareAndSwap(false, true) {
		s.conn.Ready(s)
	}
}

func (s *countSource) Notification() (string, string) { return "n", s.sub }

func (s *countSource) Pull(params [][]byte, max int) ([][]byte, bool) {
	s.pulls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	size := 0
	for s.next < s.avail && size < max {
		b, _ := codec.JSON.Marshal(map[string]int{"seq": s.next})
		params = append(params, b)
		size += len(b)
		s.next++
	}
	if s.next < s.avail {
		return params, true
	}
	s.ready.Store(false)
	return params, false
}

// TestReadySourcesArePulledInTurn: sources made ready from many goroutines, while others push
// frames, over a transport that takes direct writes only now and then: every source's frames
// are written exactly once and in order, the transport is never written by two at once, and
// no source is pulled again and again while others wait.
func TestReadySourcesArePulledInTurn(t *testing.T) {
	const sources, perSource, pushers, perPusher = 8, 3000, 2, 500
	e := &stressEnd{t: t}
	conn := NewConn(e, codec.JSON, &Options{MaxTrySend: pushers * perPusher})
	conn.Start(context.Background())
	srcs := make([]*countSource, sources)
	var wg sync.WaitGroup
	for i := range srcs {
		s := &countSource{sub: fmt.Sprint("s", i), conn: conn}
		srcs[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(i), 3))
			for added := 0; added < perSource; {
				n := min(1+rnd.IntN(200), perSource-added)
				s.add(n)
				added += n
				if rnd.IntN(4) == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
	}
	for g := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := fmt.Sprint("p", g)
			for seq := range perPusher {
				b, _ := codec.JSON.Marshal(map[string]int{"seq": seq})
				if !conn.TrySendFrames([]Frame{{Method: "n", Sub: sub, Params: b}}, 1, nil) {
					t.Errorf("TrySendFrames %s %d refused", sub, seq)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := sources*perSource + pushers*perPusher
	for deadline := time.Now().Add(20 * time.Second); e.count() < want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	conn.Close()
	if n := e.count(); n != want {
		t.Fatalf("%d frames written, want %d", n, want)
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
	for _, s := range srcs {
		// A pull takes at least a share of PullChunk when it has that much: about
		// 3,000 × 10 bytes / 4 KiB of them, and those that found nothing new.
		if p := s.pulls.Load(); p > perSource {
			t.Errorf("%s pulled %d times for %d frames", s.sub, p, perSource)
		}
	}
}

// Ready on an ended connection does nothing, and a connection that ends with sources ready
// drops them: nothing is pulled after the end.
func TestReadyAfterTheEnd(t *testing.T) {
	a, b := NewPipe(1)
	defer b.Close()
	conn := NewConn(a, codec.JSON, nil)
	conn.Start(context.Background())
	s := &countSource{sub: "s", conn: conn}
	s.add(10_000) // more than the pipe holds: the writer waits on it
	conn.Close()
	pulls := s.pulls.Load()
	s.ready.Store(false)
	s.add(1)
	time.Sleep(10 * time.Millisecond)
	if s.pulls.Load() != pulls {
		t.Fatalf("pulled after the connection ended")
	}
}
