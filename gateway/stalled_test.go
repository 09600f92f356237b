package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/gateway/internal/wsnet"
)

// TestStalledReaderCatchesUpOrLags: a client that stops reading costs the replica its
// subscriptions' positions, not copies of events, and its connection stays open. Once it
// reads again, a subscription that fell behind the window of recent events (1 MiB here)
// catches up from the log while it is at most BALLET_CATCH_UP_LIMIT (200 here) of its
// stream's events behind, more than BALLET_REPLAY_LIMIT (40) or not, every event once and in
// order, waiting for its subject's replay budget (20 events a second) rather than closing;
// further behind, it gets stream.closed lagging after what it had, as the Realtime API says,
// and its connection goes on. A reading client of the same stream gets every event meanwhile.
func TestStalledReaderCatchesUpOrLags(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{RecentBytes: 1 << 20, CatchUpLimit: 200,
		Config: gateway.Config{ReplayLimit: 40, ReplayRate: 20}, WebSockets: &wsnet.Options{FlushStall: 5 * time.Minute}})
	env.Project(t, "WEB", "alice", "viewer")
	reader := login(t, env, codec.MsgPack, "alice")
	reader.mustCall("stream.subscribe", map[string]any{"subscription": "r", "stream": "project:WEB"}, nil)

	// The stalled client, with a small receive buffer, reads its answers, then nothing until
	// told.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		return c, err
	}}}
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stalled, _, err := websocket.Dial(dctx, env.URL, &websocket.DialOptions{Subprotocols: []string{codec.NameJSON}, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.CloseNow()
	stalled.SetReadLimit(1 << 20)
	next := func() *codec.Message {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, data, err := stalled.Read(ctx)
		m := new(codec.Message)
		if err == nil {
			err = codec.JSON.Decode(data, m)
		}
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	nextEvent := func() wireEvent {
		t.Helper()
		m := next()
		var ev wireEvent
		if m.Method != "stream.event" || codec.JSON.Unmarshal(m.Params, &ev) != nil {
			t.Fatalf("got %s %s, want stream.event", m.Method, m.Params)
		}
		return ev
	}
	for i, req := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"` + env.Token(t, "alice") + `"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"stream.subscribe","params":{"subscription":"x","stream":"project:WEB"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"stream.subscribe","params":{"subscription":"y","stream":"item:WEB-1"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"stream.subscribe","params":{"subscription":"z","stream":"item:WEB-2"}}`,
	} {
		if err := stalled.Write(context.Background(), websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		if m := next(); m.ID != int64(i+1) || m.Error != nil {
			t.Fatalf("stalled client setup %d: %+v", i, m)
		}
	}
	pad := strings.Repeat("p", 32<<10)
	commit := func(n int, key string) (seqs []int64) {
		for i := range n {
			ev := itemEvent("WEB", key, "item.updated", i)
			ev.Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, pad))
			seq := appendN(t, env, ev)
			// The reader keeps up; the stalled client falls further behind.
			if got, err := reader.nextEvent(20 * time.Second); err != nil || got.Seq != seq {
				t.Fatalf("reader after %d events: %v %v, want seq %d", i, got, err, seq)
			}
			seqs = append(seqs, seq)
		}
		return seqs
	}

	// 60 events of 32 KB: far more than the window and the socket buffers hold, more than the
	// replay limit, fewer than the catch-up limit. Nothing is closed; once the client reads, x
	// and z catch up, reading more than their subject's replay budget holds (40), which paces
	// them: about 2 s.
	seqs := commit(60, "WEB-2")
	if c := env.Hub.Count(); c != 4 || closesWithCode(t, env.Server, "1013") != 0 {
		t.Fatalf("while stalled: %d subscriptions, %v closes 1013; want 4 and none", c, closesWithCode(t, env.Server, "1013"))
	}
	start := time.Now()
	got := map[string][]int64{}
	for len(got["x"]) < len(seqs) || len(got["z"]) < len(seqs) {
		ev := nextEvent()
		got[ev.Subscription] = append(got[ev.Subscription], ev.Seq)
	}
	if fmt.Sprint(got["x"]) != fmt.Sprint(seqs) || fmt.Sprint(got["z"]) != fmt.Sprint(seqs) || len(got["y"]) != 0 {
		t.Fatalf("caught up: %v\nwant x and z %v", got, seqs)
	}
	if n := catchUps(t, env, "caught_up"); n < 2 || catchUps(t, env, "lagging") != 0 || time.Since(start) < time.Second {
		t.Fatalf("catch-ups %v (want x's and z's at least), lagging %v, in %v (want the budget's pace)",
			n, catchUps(t, env, "lagging"), time.Since(start))
	}

	// 300 more, of another item, while it does not read: x is 300 behind, z and y nothing.
	seqs = commit(300, "WEB-3")
	var lastSeen int64
	for {
		m := next()
		if m.Method == "stream.closed" {
			var p map[string]string
			_ = codec.JSON.Unmarshal(m.Params, &p)
			if p["subscription"] != "x" || p["reason"] != "lagging" {
				t.Fatalf("closed %v", p)
			}
			break
		}
		var ev wireEvent
		_ = codec.JSON.Unmarshal(m.Params, &ev)
		if ev.Subscription != "x" || (lastSeen != 0 && ev.Seq <= lastSeen) || ev.Seq < seqs[0] {
			t.Fatalf("unexpected %+v after %d", ev, lastSeen)
		}
		lastSeen = ev.Seq
	}
	if env.Hub.Count() != 3 || metricValue(t, env.Server, "ballet_gateway_lagging_closes_total") != 1 ||
		catchUps(t, env, "lagging") != 1 {
		t.Fatalf("after lagging: %d subscriptions, lagging closes %v", env.Hub.Count(),
			metricValue(t, env.Server, "ballet_gateway_lagging_closes_total"))
	}
	// The connection goes on, as the client recipe does: from_seq that far back is -32010,
	// a fresh subscription follows the stream live.
	k := newClient(t, stalled, codec.JSON)
	k.nextID = 10
	from := seqs[0] - 1
	if lastSeen != 0 {
		from = lastSeen
	}
	k.wantError("stream.subscribe", map[string]any{"subscription": "x", "stream": "project:WEB", "from_seq": from}, -32010)
	k.mustCall("stream.subscribe", map[string]any{"subscription": "x", "stream": "project:WEB"}, nil)
	last := commit(1, "WEB-1")[0]
	seen := map[string]bool{}
	for range 2 {
		ev := k.mustEvent()
		if ev.Seq != last || seen[ev.Subscription] || ev.Subscription != "x" && ev.Subscription != "y" {
			t.Fatalf("after resubscribing: %+v, want seq %d once on x and once on y", ev, last)
		}
		seen[ev.Subscription] = true
	}
}

// catchUps is ballet_gateway_catch_ups_total of outcome.
func catchUps(t *testing.T, env *gatewaytest.Env, outcome string) float64 {
	t.Helper()
	v, _ := labeledMetric(t, env.Server, "ballet_gateway_catch_ups_total", "outcome", outcome)
	return v
}
