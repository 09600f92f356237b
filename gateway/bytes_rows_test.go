package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/rpc"
)

// What one subject's connections can make a replica hold, each shape measured with
// runtime.ReadMemStats in this process (server and clients): the peak of the heap above a
// baseline taken after a collection. These tests do not run in parallel with others, so the
// heap is their own.

// floodQueueBytes is the BALLET_CONNECTION_QUEUE_BYTES of the flood tests, lower than the
// default 4 MiB so that their bounds, stated from it, are tight; a reader that keeps up
// never has that much queued.
const floodQueueBytes = 1 << 20

// floodBudgets lift the request budgets of a connection and of a subject, so that every
// request of a flood is served and what is measured is what it makes the replica hold.
var floodBudgets = gateway.Config{RequestRate: 100_000, SubjectRequestRate: 100_000,
	// The readers only read: no heartbeat timeout however long a loaded machine takes.
	HeartbeatInterval: 10 * time.Minute}

// connectionsHeap is what n connections may hold at most by BALLET_CONNECTION_QUEUE_BYTES of
// queueBytes: each its queue and the batch being written.
func connectionsHeap(n, queueBytes int) int64 { return int64(n) * int64(queueBytes) * 2 }

// pulledHeap is what n connections that stopped reading hold of stream events: the frames
// of the last chunk their writers pulled (rpc.PullChunk), spliced and not yet taken by the
// socket, and that chunk's list of frames.
func pulledHeap(n int) int64 { return int64(n) * 3 * rpc.PullChunk }

// recentHeap is what the events dispatched meanwhile may hold: the window of recent events
// and the bodies cached for replays (each bounded by BALLET_RECENT_EVENTS_BYTES), and a batch
// of the tailer's reads (about 8 MiB).
func recentHeap(recentBytes int) int64 { return 2*int64(recentBytes) + 8<<20 }

// floodSlack is the rest the heap may hold during a flood: the database driver's buffers,
// the clients' reads, the collector's timing.
const floodSlack = 16 << 20

// The bound of TestSlowConnectionsAreBoundedInBytes.
const (
	slowConns, slowSubs, slowEvents, slowPayload = 10, 256, 2000, 10 << 10
	slowRecentBytes                              = 8 << 20
)

var slowConnsHeapGrowth = pulledHeap(slowConns) + recentHeap(slowRecentBytes) + floodSlack

// Ten connections of one subject that stop reading, each with 256 subscriptions that all
// take every event (the project's stream with 255 type filters that select them all), while
// another member commits 2,000 events of 10 KB: each event is held once, in the hub's window,
// and each subscription is a position in it, so the heap peaks under slowConnsHeapGrowth and
// no connection is closed. A fast reader of the project gets every event, once and in order.
func TestSlowConnectionsAreBoundedInBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20 MB of events")
	}
	cfg := floodBudgets
	cfg.ConnectionQueueBytes = floodQueueBytes
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg, RecentBytes: slowRecentBytes})
	env.Project(t, "WEB", "alice", "viewer", "bob", "member")

	subs := []string{request(2, "stream.subscribe", map[string]any{"subscription": "s0", "stream": "project:WEB"})}
	for i := 1; i < slowSubs; i++ {
		subs = append(subs, request(2+i, "stream.subscribe", map[string]any{"subscription": fmt.Sprint("s", i),
			"stream": "project:WEB", "types": []string{"item.updated", fmt.Sprint("other.", i)}}))
	}
	for range slowConns {
		pausedClient(t, env, "alice", subs).wantNoErrors()
	}
	growth := peakWhileCommitting(t, env, slowEvents, slowPayload, func(int) string { return "WEB-1" })
	t.Logf("heap peaked %.1f MiB above the baseline (bound %.0f MiB); closed 1013: %v",
		float64(growth)/(1<<20), float64(slowConnsHeapGrowth)/(1<<20), closesWithCode(t, env.Server, "1013"))
	if growth > slowConnsHeapGrowth {
		t.Fatalf("heap peaked %d bytes above the baseline, bound %d", growth, slowConnsHeapGrowth)
	}
	if n := closesWithCode(t, env.Server, "1013"); n != 0 || env.Hub.Count() != slowConns*slowSubs+1 {
		t.Fatalf("%v closes 1013, %d subscriptions; want none closed", n, env.Hub.Count())
	}
	waitOnly(t, env, slowConns+1)
}

// The bounds of TestSameStreamManyTimesPerConnection: the peak, and what may stay held once
// every connection is gone (the window of recent events, 500 of 1 KB, and their bodies).
const (
	sameConns, sameSubs, sameEvents, samePayload = 20, 16, 500, 1 << 10
	sameHeapGrowth                               = 64 << 20
	sameHeapHeld                                 = 16 << 20
)

// Twenty reading connections of one subject each subscribe 16 times to the same stream, as
// the Realtime API allows: each of 500 events arrives once on each of the 320 subscriptions,
// in order, and is held once. The heap peaks under sameHeapGrowth, and once the connections
// are closed it is back within sameHeapHeld of where it was before they opened.
func TestSameStreamManyTimesPerConnection(t *testing.T) {
	cfg := floodBudgets
	cfg.ConnectionQueueBytes = floodQueueBytes
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg})
	env.Project(t, "WEB", "alice", "viewer", "bob", "member")
	params := make([]any, sameSubs)
	for i := range params {
		params[i] = map[string]any{"subscription": fmt.Sprint("s", i), "stream": "project:WEB"}
	}

	base := settledHeap(t)
	peak := heapPeak(20 * time.Millisecond)
	ks := make([]*wsClient, sameConns)
	readers := make([]*eventReader, sameConns)
	for i := range ks {
		k := login(t, env, codecs[i%2], "alice")
		for _, m := range k.pipeline("stream.subscribe", params) {
			if m.Error != nil {
				t.Fatalf("subscribe: %+v", m.Error)
			}
		}
		ks[i], readers[i] = k, readEvents(k, sameEvents*sameSubs)
	}
	commitPaced(t, env, sameEvents, samePayload, func(int) string { return "WEB-1" }, readers...)
	for i, r := range readers {
		if err := r.wait(); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	growth := int64(peak()) - int64(base)
	for _, k := range ks {
		k.hangUp()
	}
	waitOnly(t, env, 0)
	held := int64(heapAfterGC()) - int64(base)
	t.Logf("heap peaked %.1f MiB above the baseline (bound %.0f MiB); %.1f MiB held once closed (bound %.0f MiB)",
		float64(growth)/(1<<20), float64(sameHeapGrowth)/(1<<20), float64(held)/(1<<20), float64(sameHeapHeld)/(1<<20))
	if growth > sameHeapGrowth {
		t.Fatalf("heap peaked %d bytes above the baseline, bound %d", growth, sameHeapGrowth)
	}
	if held > sameHeapHeld {
		t.Fatalf("%d bytes held after the connections closed, bound %d", held, sameHeapHeld)
	}
}

// The turn of TestPausedWatchersAreBoundedInBytes and its bound. The turn's answer is
// larger than what a socket's kernel buffers take (up to 4 MB each, not the process's heap),
// so that it reaches the paused connections' queues.
const (
	watchPaused, watchTries = 20, 2
	watchOutputs, watchText = 1000, 7000 // text outputs of the turn, characters each
	watchQueueBytes         = 256 << 10
)

var (
	watchHeapHeld = connectionsHeap(watchPaused, watchQueueBytes) + floodSlack
	// The peak adds the turn's own copies of its answer: as the model builds it, as it is
	// stored, published output by output and read, and garbage not yet collected.
	watchHeapPeak = watchHeapHeld + 8*watchOutputs*watchText
)

// Twenty connections of one subject that stop reading each watch one session twice
// while a turn streams
// 1,000 outputs of 7 KB (7 MB): each is closed 1013 once BALLET_CONNECTION_QUEUE_BYTES
// (256 KiB here) is queued, so that while the turn still runs the live heap is within
// watchHeapHeld of where it was before the turn (the connections' queues at most, twice),
// and its peak within watchHeapPeak; without the bound each would hold what its socket did
// not take of the answer. A reading watcher gets the whole output, in order.
func TestPausedWatchersAreBoundedInBytes(t *testing.T) {
	// Built here rather than parsed: a script file holds at most 8 MiB. The turn pauses
	// after its answer until cancelled, so that the heap is measured while it runs. Its
	// outputs come 3 ms apart (2.3 MB/s), which the reading watcher keeps up with
	// under the race detector: the model unpaced outran it, and a watcher that falls
	// 256 KiB behind is closed 1013 as the paused ones are.
	text := strings.Repeat("0123456789", watchOutputs*watchText/10)
	script := &provider.Script{Chunk: watchText, ChunkPauseMS: 3, Rules: []provider.Rule{{Match: "long", Steps: []provider.Round{
		{Actions: []provider.Action{{Text: text}, {PauseMS: 600_000}, {Text: "never"}}}}}}}
	cfg := floodBudgets
	cfg.ConnectionQueueBytes = watchQueueBytes
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Planner: provider.NewScripted(script), Config: cfg})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	var watches []string
	for i := range watchTries {
		watches = append(watches, request(2+i, "planner.watch", map[string]any{"subscription": fmt.Sprint("w", i), "session": session}))
	}
	for range watchPaused {
		pausedClient(t, env, "alice", watches).wantNoErrors()
	}
	reader := login(t, env, codec.MsgPack, "alice")
	reader.mustCall("planner.watch", map[string]any{"subscription": "w", "session": session}, nil)

	base := heapAfterGC()
	peak := heapPeak(20 * time.Millisecond)
	reader.mustCall("planner.send", map[string]any{"session": session, "text": "a long answer"}, nil)
	var offset int64
	for at := 0; at < len(text); {
		o := reader.nextOutput("w")
		if o.Offset != offset+1 || (o.Type == "text" && !strings.HasPrefix(text[at:], o.Text)) {
			t.Fatalf("output at offset %d after %d: %s of %d characters, at character %d of the answer",
				o.Offset, offset, o.Type, len(o.Text), at)
		}
		if o.Type == "text" {
			at += len(o.Text)
		}
		offset = o.Offset
	}
	eventually(t, "every paused connection is closed 1013", func() bool { return closesWithCode(t, env.Server, "1013") >= watchPaused })
	held := int64(heapAfterGC()) - int64(base)
	reader.mustCall("planner.cancel", map[string]any{"session": session}, nil)
	if outs := reader.outputs("w"); outs[len(outs)-1].Text != "cancelled" {
		t.Fatalf("the turn ended with %+v", outs[len(outs)-1])
	}
	growth := int64(peak()) - int64(base)
	t.Logf("while the turn ran: %.1f MiB of live heap above the baseline (bound %.0f MiB), a peak of %.1f MiB (bound %.0f MiB); closed 1013: %v, for queued bytes: %v",
		float64(held)/(1<<20), float64(watchHeapHeld)/(1<<20), float64(growth)/(1<<20), float64(watchHeapPeak)/(1<<20),
		closesWithCode(t, env.Server, "1013"), limitRejections(t, env.Server, "queued_bytes"))
	if held > watchHeapHeld {
		t.Fatalf("%d bytes of live heap above the baseline while the turn ran, bound %d", held, watchHeapHeld)
	}
	if growth > watchHeapPeak {
		t.Fatalf("heap peaked %d bytes above the baseline, bound %d", growth, watchHeapPeak)
	}
	if n := limitRejections(t, env.Server, "queued_bytes"); n != watchPaused || closesWithCode(t, env.Server, "1013") != watchPaused {
		t.Fatalf("queued_bytes rejections %v, want each paused connection closed once for them", n)
	}
	waitOnly(t, env, 1)
}
