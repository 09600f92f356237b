package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
)

// The bound of TestSlowConnectionIsBoundedInBytes: what the heap of this process (the
// server, the test's clients, the recent events kept in memory, the database driver's rows)
// may grow by while 2,000 events of 80 KB are dispatched to one slow connection of 64
// subscriptions and to a fast reader. Without a bound in bytes the slow connection alone holds
// every one of them: more than 160 MB.
const slowConnHeapGrowth = 100 << 20

// One connection that stops reading, subscribed to 64 streams (its project's and 63 of its
// items'), while events of 80 KB are committed: the bytes queued for it stay under
// BALLET_CONNECTION_QUEUE_BYTES, so it is closed with 1013 long before it holds the events,
// and the heap stays bounded; a fast reader of the same project gets every event, in order.
func TestSlowConnectionIsBoundedInBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 160 MB of events")
	}
	const events, payload = 2000, 80 << 10
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: gateway.Config{
		RecentEventsBytes: 8 << 20, RequestRate: 100_000,
	}})
	env.Project(t, "WEB", "alice", "viewer")

	// The slow one: subscribes, then reads nothing, with a small receive buffer.
	h := hostileDial(t, env)
	_ = h.c.(*net.TCPConn).SetReadBuffer(16 << 10)
	if resp := h.upgrade(t, ""); resp.StatusCode != 101 {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	slow := &rawClient{t: t, c: h.c, br: h.br}
	slow.write(textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, "alice"))))
	slow.want(1)
	var subs [][]byte
	for i := range 64 {
		stream := "project:WEB"
		if i > 0 {
			stream = fmt.Sprintf("item:WEB-%d", i)
		}
		subs = append(subs, textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"stream.subscribe","params":{"subscription":"s%d","stream":%q}}`, 10+i, i, stream)))
	}
	slow.write(subs...)
	for _, p := range slow.responses(64) {
		if strings.Contains(string(p), `"error"`) {
			t.Fatalf("subscribe: %s", p)
		}
	}

	// The fast one reads every event as it comes.
	fast := login(t, env, codec.MsgPack, "alice")
	fast.mustCall("stream.subscribe", map[string]any{"subscription": "f", "stream": "project:WEB"}, nil)
	var got atomic.Int64
	var order atomic.Value
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		var last int64
		for got.Load() < events {
			m, err := fast.next(60 * time.Second)
			if err != nil {
				order.Store(err.Error())
				return
			}
			if m.Method != "stream.event" {
				continue
			}
			var ev struct {
				Seq int64 `json:"seq"`
			}
			if err := codec.MsgPack.Unmarshal(m.Params, &ev); err != nil || ev.Seq <= last {
				order.Store(fmt.Sprintf("event seq %d after %d (%v)", ev.Seq, last, err))
				return
			}
			last = ev.Seq
			got.Add(1)
		}
	}()

	base := heapAfterGC()
	peak := heapPeak(20 * time.Millisecond)
	body, _ := json.Marshal(map[string]string{"description": strings.Repeat("d", payload)})
	ctx := context.Background()
	for i := 0; i < events; i += 10 {
		// The writer keeps within 20 events of the fast reader, which keeps up as a reader on
		// a machine with cores to spare would; the slow one reads nothing.
		for got.Load() < int64(i-20) && order.Load() == nil {
			time.Sleep(time.Millisecond)
		}
		var batch []streams.NewEvent
		for j := i; j < i+10; j++ {
			batch = append(batch, streams.NewEvent{ProjectKey: "WEB", Type: "item.updated", EntityType: "item",
				EntityID: fmt.Sprint(j), EntityKey: fmt.Sprintf("WEB-%d", 1+j%63), ActorKind: "human", ActorSubject: "bob", Payload: body})
		}
		if _, err := env.Store.Append(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	<-readDone
	if msg := order.Load(); msg != nil {
		t.Fatalf("the fast reader: %v (after %d events)", msg, got.Load())
	}
	growth := int64(peak()) - int64(base)
	closed := closesWithCode(t, env.Server, "1013")
	t.Logf("heap peaked %.1f MiB above the baseline; the slow connection closed 1013: %v", float64(growth)/(1<<20), closed)
	if closed != 1 || limitRejections(t, env.Server, "queued_bytes") != 1 {
		t.Fatalf("closes with 1013: %v, queued_bytes rejections %v; want the slow connection closed once", closed,
			limitRejections(t, env.Server, "queued_bytes"))
	}
	if growth > slowConnHeapGrowth {
		t.Fatalf("heap peaked %d bytes above the baseline, bound %d", growth, slowConnHeapGrowth)
	}
	// The replica let the slow connection go: only the fast reader's session and socket are
	// left. (Its own end may take long to see the close: the kernel holds what it had sent and
	// probes a window the test reopens only now.)
	deadline := time.Now().Add(30 * time.Second)
	for env.Server.Sessions() != 1 || env.Server.Sockets() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions, %d sockets open; want only the fast reader's", env.Server.Sessions(), env.Server.Sockets())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
