package streams

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// countingSender pulls every ready subscription; flush pulls them as a connection's writer
// would after the dispatch. The hub may call it from several goroutines at once.
type countingSender struct {
	mu    sync.Mutex
	n     int
	ready []Source
	buf   [][]byte
}

func (c *countingSender) Ready(src Source) {
	c.mu.Lock()
	c.ready = append(c.ready, src)
	c.mu.Unlock()
}

func (c *countingSender) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.ready) > 0 {
		src := c.ready[0]
		c.ready = c.ready[1:]
		var more bool
		c.buf, more = src.Pull(c.buf[:0], 32<<10)
		c.n += len(c.buf)
		if more {
			c.ready = append(c.ready, src)
		}
	}
	c.ready = c.ready[:0:0]
}

type emptyLog struct{}

func (emptyLog) Head(context.Context) (int64, error)                    { return 0, nil }
func (emptyLog) ReadAfter(context.Context, int64, int) ([]Event, error) { return nil, nil }
func (emptyLog) Wait(context.Context, int64) error                      { return nil }
func (emptyLog) ReadStream(context.Context, Stream, int64, int64, int) ([]Event, error) {
	return nil, nil
}

// BenchmarkHubFanout dispatches one event to N subscriptions of one stream
// (half of each codec): the hub's cost per delivery, without the network.
func BenchmarkHubFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			h := NewHub(nil)
			out := &countingSender{}
			for i := 0; i < n; i++ {
				c := codec.MsgPack
				if i%2 == 1 {
					c = codec.JSON
				}
				if _, _, err := h.Subscribe(context.Background(), emptyLog{}, SubscribeRequest{
					ID: fmt.Sprint("s", i), Subject: "alice", Stream: Stream{Kind: StreamProject, Key: "WEB"},
					Codec: c, Out: out,
				}); err != nil {
					b.Fatal(err)
				}
			}
			evs := make([]Event, 1)
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				evs[0] = Event{Seq: int64(i + 1), ProjectKey: "WEB", Type: "item.updated", EntityType: "item",
					EntityID: "0199", EntityKey: "WEB-1", OccurredAt: now, ActorKind: "human", ActorSubject: "alice",
					Payload: []byte(`{"version":2}`)}
				h.Dispatch(evs)
				out.flush()
			}
			b.ReportMetric(float64(out.n)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

// BenchmarkIdleSubscription opens b.N subscriptions of one stream that receive nothing and
// reports the heap each holds (run it with -benchtime Nx; the time is not a measurement).
func BenchmarkIdleSubscription(b *testing.B) {
	h := NewHub(nil)
	out := &countingSender{}
	subs := make([]*Subscription, 0, b.N)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprint("s", i) // the client's, not the subscription's
	}
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	for _, id := range ids {
		sub, _, err := h.Subscribe(context.Background(), emptyLog{}, SubscribeRequest{
			ID: id, Subject: "alice", Stream: Stream{Kind: StreamProject, Key: "WEB"}, Codec: codec.JSON, Out: out,
		})
		if err != nil {
			b.Fatal(err)
		}
		subs = append(subs, sub)
	}
	after := heap()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(after-before)/float64(b.N), "heap-B/subscription")
	for _, sub := range subs {
		h.Unsubscribe(sub)
	}
}

// BenchmarkTypeFilterMatch is what a subscription with a types filter pays for each event of its
// stream it pulls: one filter of three exact types and two prefixes, against a type it selects by
// prefix and one it does not select.
func BenchmarkTypeFilterMatch(b *testing.B) {
	f, err := ParseTypes([]string{"item.created", "item.deleted", "item.moved", "comment.*", "planner.*"})
	if err != nil {
		b.Fatal(err)
	}
	types := []string{"comment.added", "item.state_changed"}
	n := 0
	for i := 0; b.Loop(); i++ {
		if f.Match(types[i&1]) {
			n++
		}
	}
	_ = n
}

// BenchmarkHubFanoutFiltered dispatches one event to 1,000 subscriptions of one stream with one
// types filter (that of BenchmarkTypeFilterMatch), half the events selected: with the filter
// group's memo each event is matched once, without it once a subscription.
func BenchmarkHubFanoutFiltered(b *testing.B) {
	for _, memo := range []bool{true, false} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) {
			h := NewHub(nil)
			defer h.Close()
			if !memo {
				h.groupShared = 1 << 30
			}
			f, err := ParseTypes([]string{"item.created", "item.deleted", "item.moved", "comment.*", "planner.*"})
			if err != nil {
				b.Fatal(err)
			}
			out := &countingSender{}
			for i := range 1000 {
				if _, _, err := h.Subscribe(context.Background(), emptyLog{}, SubscribeRequest{
					ID: fmt.Sprint("s", i), Subject: "alice", Stream: Stream{Kind: StreamProject, Key: "WEB"},
					Codec: codec.MsgPack, Out: out, Types: f,
				}); err != nil {
					b.Fatal(err)
				}
			}
			types := []string{"comment.added", "item.state_changed"}
			evs := make([]Event, 1)
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				evs[0] = Event{Seq: int64(i + 1), ProjectKey: "WEB", Type: types[i&1], EntityType: "item",
					EntityID: "0199", EntityKey: "WEB-1", OccurredAt: now, ActorKind: "human", ActorSubject: "alice",
					Payload: []byte(`{"version":2}`)}
				h.Dispatch(evs)
				out.flush()
			}
			b.ReportMetric(float64(out.n)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}
