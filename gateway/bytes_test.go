package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/streams"
)

// The bound of TestSlowConnectionIsBoundedInBytes: what the heap of this process (the
// server, the test's clients, the window of recent events, the database driver's rows) may
// grow by while 2,000 events of 80 KB are dispatched to one slow connection of 64
// subscriptions and to a fast reader: the window (8 MiB here) and a tailer's batch, twice
// (what was let go and not yet collected), a chunk pulled for the slow connection, and slack.
// Were its events queued for it, the slow connection alone would hold every one of them:
// more than 160 MB.
var slowConnHeapGrowth = 2*recentHeap(8<<20) + pulledHeap(1) + floodSlack

// One connection that stops reading, subscribed to 64 streams (its project's and 63 of its
// items'), while events of 80 KB are committed: it costs the replica 64 positions in the
// window of recent events, not copies of events, so it is not closed and the heap stays
// bounded; a fast reader of the same project gets every event, in order.
func TestSlowConnectionIsBoundedInBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 160 MB of events")
	}
	const events, payload = 2000, 80 << 10
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, RecentBytes: 8 << 20, Config: gateway.Config{
		RequestRate: 100_000,
		// The fast reader only reads: no heartbeat timeout however long a loaded machine takes.
		HeartbeatInterval: 10 * time.Minute,
	}, WebSockets: &wsnet.Options{FlushStall: 10 * time.Minute}}) // the slow one is not cut off meanwhile
	env.Project(t, "WEB", "alice", "viewer")

	// The slow one: subscribes, then reads nothing.
	var subs []string
	for i := range 64 {
		stream := "project:WEB"
		if i > 0 {
			stream = fmt.Sprintf("item:WEB-%d", i)
		}
		subs = append(subs, request(2+i, "stream.subscribe", map[string]any{"subscription": fmt.Sprint("s", i), "stream": stream}))
	}
	pausedClient(t, env, "alice", subs).wantNoErrors()

	// The fast one reads every event as it comes.
	growth := peakWhileCommitting(t, env, events, payload, func(j int) string { return fmt.Sprintf("WEB-%d", 1+j%63) })
	t.Logf("heap peaked %.1f MiB above the baseline (bound %.0f MiB)", float64(growth)/(1<<20), float64(slowConnHeapGrowth)/(1<<20))
	if n := closesWithCode(t, env.Server, "1013"); n != 0 || limitRejections(t, env.Server, "queued_bytes") != 0 {
		t.Fatalf("closes with 1013: %v, queued_bytes rejections %v; want none", n, limitRejections(t, env.Server, "queued_bytes"))
	}
	if growth > slowConnHeapGrowth {
		t.Fatalf("heap peaked %d bytes above the baseline, bound %d", growth, slowConnHeapGrowth)
	}
	waitOnly(t, env, 2)
}

// request is the JSON text of a JSON-RPC request.
func request(id int, method string, params any) string {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// pausedAnswers are the answers a paused client read, by request id.
type pausedAnswers struct {
	t    *testing.T
	byID map[int64][]byte
}

// pausedClient opens a JSON connection with a small receive buffer, authenticates as
// subject, sends requests (request's texts, ids from 2) in one write and reads their answers;
// then it reads nothing more, as a client that stopped reading. The socket closes with the
// test.
func pausedClient(t *testing.T, env *gatewaytest.Env, subject string, requests []string) pausedAnswers {
	t.Helper()
	_, a := pausedConn(t, env, subject, requests)
	return a
}

// pausedConn is pausedClient that also gives the client's socket.
func pausedConn(t *testing.T, env *gatewaytest.Env, subject string, requests []string) (net.Conn, pausedAnswers) {
	t.Helper()
	h := hostileDial(t, env)
	_ = h.c.(*net.TCPConn).SetReadBuffer(16 << 10)
	if resp := h.upgrade(t, ""); resp.StatusCode != 101 {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	r := &rawClient{t: t, c: h.c, br: h.br}
	_ = h.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer h.c.SetReadDeadline(time.Time{})
	r.write(textFrame(request(1, "auth", map[string]string{"token": env.Token(t, subject)})))
	r.want(1)
	frames := make([][]byte, len(requests))
	for i, req := range requests {
		frames[i] = textFrame(req)
	}
	r.write(frames...)
	return h.c, pausedAnswers{t: t, byID: r.responses(len(requests))}
}

// wantNoErrors fails the test if any answer is an error.
func (a pausedAnswers) wantNoErrors() {
	a.t.Helper()
	for _, p := range a.byID {
		if strings.Contains(string(p), `"error"`) {
			a.t.Fatalf("answer %s", p)
		}
	}
}

// inOrder decodes the answers to the n requests of ids from first, in the order of the ids.
func (a pausedAnswers) inOrder(first, n int) []*codec.Message {
	a.t.Helper()
	ms := make([]*codec.Message, n)
	for i := range ms {
		ms[i] = new(codec.Message)
		if err := codec.JSON.Decode(a.byID[int64(first+i)], ms[i]); err != nil {
			a.t.Fatalf("answer to %d: %v", first+i, err)
		}
	}
	return ms
}

// eventReader reads stream.event on a connection in the background until it has n, each
// of a higher seq than the one before on its subscription (so none twice).
type eventReader struct {
	got  atomic.Int64
	fail atomic.Value // string: why it stopped before n
	done chan struct{}
}

func readEvents(k *wsClient, n int64) *eventReader {
	r := &eventReader{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		last := map[string]int64{}
		for r.got.Load() < n {
			m, err := k.next(60 * time.Second)
			if err != nil {
				r.fail.Store(err.Error())
				return
			}
			if m.Method != "stream.event" {
				continue
			}
			var ev struct {
				Subscription string `json:"subscription"`
				Seq          int64  `json:"seq"`
			}
			if err := k.c.Unmarshal(m.Params, &ev); err != nil || ev.Seq <= last[ev.Subscription] {
				r.fail.Store(fmt.Sprintf("%s: event seq %d after %d (%v)", ev.Subscription, ev.Seq, last[ev.Subscription], err))
				return
			}
			last[ev.Subscription] = ev.Seq
			r.got.Add(1)
		}
	}()
	return r
}

// failed reports whether the reader stopped early.
func (r *eventReader) failed() bool { return r.fail.Load() != nil }

// wait waits for the reader to end and says why it stopped early, if it did.
func (r *eventReader) wait() error {
	<-r.done
	if msg := r.fail.Load(); msg != nil {
		return fmt.Errorf("%v (after %d events)", msg, r.got.Load())
	}
	return nil
}

// peakWhileCommitting has a fast reader of project:WEB (alice's, in MessagePack) read
// while commitPaced commits, and returns how far the heap peaked above its level before
// the commits; the test fails unless the reader got every event, once and in order.
func peakWhileCommitting(t *testing.T, env *gatewaytest.Env, events, payload int, keyOf func(int) string) int64 {
	t.Helper()
	fast := login(t, env, codec.MsgPack, "alice")
	fast.mustCall("stream.subscribe", map[string]any{"subscription": "f", "stream": "project:WEB"}, nil)
	reader := readEvents(fast, int64(events))
	base := heapAfterGC()
	peak := heapPeak(20 * time.Millisecond)
	commitPaced(t, env, events, payload, keyOf, reader)
	err := reader.wait()
	growth := int64(peak()) - int64(base)
	if err != nil {
		t.Fatalf("the fast reader: %v", err)
	}
	return growth
}

// commitPaced commits events item.updated events of WEB by bob, each with a description of
// payload bytes and the item key keyOf gives, ten at a time. The writer keeps within 20
// events of the slowest reader, which keeps up as a reader on a machine with cores to spare
// would; it stops early once a reader has failed.
func commitPaced(t *testing.T, env *gatewaytest.Env, events, payload int, keyOf func(int) string, readers ...*eventReader) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"description": strings.Repeat("d", payload)})
	behind := func(i int) bool {
		for _, r := range readers {
			if r.failed() {
				return false
			}
		}
		for _, r := range readers {
			if r.got.Load() < int64(i-20) {
				return true
			}
		}
		return false
	}
	ctx := context.Background()
	for i := 0; i < events; i += 10 {
		for behind(i) {
			time.Sleep(time.Millisecond)
		}
		var batch []streams.NewEvent
		for j := i; j < i+10 && j < events; j++ {
			batch = append(batch, streams.NewEvent{ProjectKey: "WEB", Type: "item.updated", EntityType: "item",
				EntityID: fmt.Sprint(j), EntityKey: keyOf(j), ActorKind: "human", ActorSubject: "bob", Payload: body})
		}
		if _, err := env.Store.Append(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
}

// waitOnly waits until the replica holds only n sessions and their sockets (the test's REST
// requests' idle sockets closed first).
func waitOnly(t *testing.T, env *gatewaytest.Env, n int) {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for env.Server.Sessions() != n || gateway.Sockets(env.Server) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions, %d sockets open; want %d", env.Server.Sessions(), gateway.Sockets(env.Server), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
