package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
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
		// The fast reader only reads: no heartbeat timeout however long a loaded machine takes.
		HeartbeatInterval: 10 * time.Minute,
	}})
	env.Project(t, "WEB", "alice", "viewer")

	// The slow one subscribes to 64 streams, then reads nothing; the fast one reads every
	// event as it comes.
	streams := []string{"project:WEB"}
	for i := 1; i < 64; i++ {
		streams = append(streams, fmt.Sprintf("item:WEB-%d", i))
	}
	slowReader(t, env, "alice", streams...)
	fast := login(t, env, codec.MsgPack, "alice")
	fast.mustCall("stream.subscribe", map[string]any{"subscription": "f", "stream": "project:WEB"}, nil)
	r := readInOrder(fast, events)

	base := heapAfterGC()
	peak := heapPeak(20 * time.Millisecond)
	appendPaced(t, env, r, events, payload, func(j int) string { return fmt.Sprintf("WEB-%d", 1+j%63) })
	r.wait(t)
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
	eventually(t, "only the fast reader's session and socket are open", func() bool {
		return env.Server.Sessions() == 1 && env.Server.Sockets() == 1
	})
}
