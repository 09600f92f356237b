package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// plannerPeer is a minimal server for the planner methods, built on
// rpc.Conn over WebSocket: it records the requests it gets as JSON and
// answers as the spec says.
type plannerPeer struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	requests []string      // "method {params as JSON}"
	auths    []string      // the auth requests' params, as JSON
	headers  []http.Header // of each upgrade request
	conns    []*peerConn
	running  bool
	busy     bool
	// watch, when set, answers planner.watch (and may send output first).
	watch func(pc *peerConn, params map[string]any) map[string]any
}

type peerConn struct {
	ws  *websocket.Conn
	rpc *rpc.Conn
	c   codec.Codec
}

type peerTransport struct {
	ws  *websocket.Conn
	typ websocket.MessageType
}

func (p *peerTransport) Read(ctx context.Context) ([]byte, error) {
	_, data, err := p.ws.Read(ctx)
	return data, err
}

func (p *peerTransport) Write(ctx context.Context, frame []byte) error {
	return p.ws.Write(ctx, p.typ, frame)
}

func startPlannerPeer(t testing.TB) *plannerPeer {
	pp := &plannerPeer{t: t}
	pp.srv = httptest.NewServer(http.HandlerFunc(pp.serve))
	t.Cleanup(func() {
		pp.mu.Lock()
		conns := pp.conns
		pp.mu.Unlock()
		for _, pc := range conns {
			_ = pc.ws.CloseNow()
			pc.rpc.Close()
		}
		pp.srv.Close()
	})
	return pp
}

func (pp *plannerPeer) url() string { return "ws" + strings.TrimPrefix(pp.srv.URL, "http") + "/rpc" }

func (pp *plannerPeer) serve(w http.ResponseWriter, r *http.Request) {
	pp.mu.Lock()
	pp.headers = append(pp.headers, r.Header.Clone())
	pp.mu.Unlock()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{codec.NameMsgPack, codec.NameJSON}})
	if err != nil {
		return
	}
	c := codec.ByName(ws.Subprotocol())
	typ := websocket.MessageText
	if c.Binary() {
		typ = websocket.MessageBinary
	}
	pc := &peerConn{ws: ws, c: c}
	pc.rpc = rpc.NewConn(&peerTransport{ws: ws, typ: typ}, c, &rpc.Options{
		Handler: rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) { return pp.handle(pc, req) }),
	})
	pp.mu.Lock()
	pp.conns = append(pp.conns, pc)
	pp.mu.Unlock()
	pc.rpc.Start(context.Background())
}

func (pp *plannerPeer) handle(pc *peerConn, req *rpc.Request) (any, error) {
	var params map[string]any
	if err := req.Decode(&params); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(params)
	pp.mu.Lock()
	switch req.Method {
	case "$/heartbeat":
	case "auth":
		pp.auths = append(pp.auths, string(b))
	default:
		pp.requests = append(pp.requests, req.Method+" "+string(b))
	}
	pp.mu.Unlock()
	switch req.Method {
	case "$/heartbeat":
		return nil, nil
	case "auth":
		return map[string]any{"subject": "alice", "expires_at": time.Now().Add(time.Hour).Unix()}, nil
	case "planner.watch":
		pp.mu.Lock()
		running, watch := pp.running, pp.watch
		pp.mu.Unlock()
		if watch != nil {
			return watch(pc, params), nil
		}
		return map[string]any{"subscription": params["subscription"], "running": running}, nil
	case "planner.send":
		pp.mu.Lock()
		busy := pp.busy
		pp.mu.Unlock()
		if busy {
			return nil, rpc.Errorf(protocol.ErrConflict, "the planner is still answering")
		}
		return map[string]any{"seq": 7}, nil
	case "planner.cancel", "stream.unsubscribe":
		return map[string]any{}, nil
	}
	return nil, rpc.Errorf(rpc.ErrMethodNotFound, "method %s not found", req.Method)
}

// output sends planner.output on the newest connection.
func (pp *plannerPeer) output(params map[string]any) {
	pp.notify(pp.last(), "planner.output", params)
}

func (pp *plannerPeer) last() *peerConn {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.conns[len(pp.conns)-1]
}

func (pp *plannerPeer) notify(pc *peerConn, method string, params map[string]any) {
	if err := pc.rpc.Notify(context.Background(), method, params); err != nil {
		pp.t.Errorf("notify: %v", err)
	}
}

func (pp *plannerPeer) takeRequests() []string {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	r := pp.requests
	pp.requests = nil
	return r
}

func TestPlannerWireForm(t *testing.T) {
	for _, cd := range codecs {
		t.Run(codecName(cd), func(t *testing.T) {
			pp := startPlannerPeer(t)
			c := dial(t, pp.url(), &client.Options{Token: client.StaticToken("tok"), Codec: cd})
			ctx := context.Background()
			w, err := c.PlannerWatch(ctx, "sess-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if w.Session() != "sess-1" || w.Running() {
				t.Fatalf("watch %s running %v", w.Session(), w.Running())
			}
			seq, err := c.PlannerSend(ctx, "sess-1", "plan the release", &client.SendOptions{IdempotencyKey: "msg-1"})
			if err != nil || seq != 7 {
				t.Fatalf("send: %d %v", seq, err)
			}
			if err := c.PlannerCancel(ctx, "sess-1"); err != nil {
				t.Fatal(err)
			}
			id := w.ID()
			outputs := []map[string]any{
				{"subscription": id, "session": "sess-1", "type": "text", "text": "Looking"},
				{"subscription": id, "session": "sess-1", "type": "tool_call", "tool": "list_items",
					"tool_use_id": "tu1", "input": map[string]any{"project": "WEB", "limit": 5}},
				{"subscription": id, "session": "sess-1", "type": "tool_result", "tool_use_id": "tu1", "text": "no such project", "is_error": true},
				{"subscription": id, "session": "sess-1", "type": "message", "seq": 8},
				{"subscription": "other", "session": "sess-1", "type": "text", "text": "not ours"},
				{"subscription": id, "session": "sess-1", "type": "done", "text": "end_turn"},
			}
			for _, o := range outputs {
				pp.output(o)
			}
			var got []client.PlannerOutput
			for out := range w.Output() {
				got = append(got, out)
				if out.Type == client.OutputDone {
					break
				}
			}
			want := []client.PlannerOutput{
				{Subscription: id, Session: "sess-1", Type: client.OutputText, Text: "Looking"},
				{Subscription: id, Session: "sess-1", Type: client.OutputToolCall, Tool: "list_items", ToolUseID: "tu1",
					Input: codec.RawJSON(`{"limit":5,"project":"WEB"}`)},
				{Subscription: id, Session: "sess-1", Type: client.OutputToolResult, ToolUseID: "tu1", Text: "no such project", IsError: true},
				{Subscription: id, Session: "sess-1", Type: client.OutputMessage, Seq: 8},
				{Subscription: id, Session: "sess-1", Type: client.OutputDone, Text: "end_turn"},
			}
			if len(got) != len(want) {
				t.Fatalf("outputs %+v", got)
			}
			for i := range want {
				g := got[i]
				var gi, wi any
				if len(want[i].Input) > 0 {
					_ = json.Unmarshal(g.Input, &gi)
					_ = json.Unmarshal(want[i].Input, &wi)
					g.Input, want[i].Input = nil, nil
				}
				if !reflect.DeepEqual(g, want[i]) || !reflect.DeepEqual(gi, wi) {
					t.Fatalf("output %d: %+v (input %s), want %+v", i, got[i], got[i].Input, want[i])
				}
			}
			// The JSON form of an output is the notification's params.
			b, _ := json.Marshal(got[2])
			if !jsonEqual(b, `{"subscription":"`+id+`","session":"sess-1","type":"tool_result","tool_use_id":"tu1","text":"no such project","is_error":true}`) {
				t.Fatalf("JSON form %s", b)
			}
			if err := w.Unsubscribe(ctx); err != nil {
				t.Fatal(err)
			}
			wantReq := []string{
				`planner.watch {"session":"sess-1","subscription":"` + id + `"}`,
				`planner.send {"idempotency_key":"msg-1","session":"sess-1","text":"plan the release"}`,
				`planner.cancel {"session":"sess-1"}`,
				`stream.unsubscribe {"subscription":"` + id + `"}`,
			}
			if got := pp.takeRequests(); !reflect.DeepEqual(got, wantReq) {
				t.Fatalf("requests on the wire:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantReq, "\n"))
			}
			pp.mu.Lock()
			pp.busy = true
			pp.mu.Unlock()
			if _, err := c.PlannerSend(ctx, "sess-1", "again", nil); !errors.Is(err, protocol.ErrConflict) {
				t.Fatalf("send while busy: %v", err)
			}
			// Without a key of its own, every send gets a random one.
			_, _ = c.PlannerSend(ctx, "sess-1", "again", nil)
			reqs := pp.takeRequests()
			var keys []string
			for _, r := range reqs {
				var p struct {
					Key string `json:"idempotency_key"`
				}
				_ = json.Unmarshal([]byte(strings.TrimPrefix(r, "planner.send ")), &p)
				keys = append(keys, p.Key)
			}
			if len(keys) != 2 || len(keys[0]) != 32 || len(keys[1]) != 32 || keys[0] == keys[1] {
				t.Fatalf("sends without a key: %v", reqs)
			}
		})
	}
}

func jsonEqual(a []byte, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// After a reconnect the watch is established again, asking to resume the
// running turn from its start; a server that does not resume (its answer
// has no "resumed") gets OnResume, which runs before any new output is
// handed over.
func TestPlannerWatchResumes(t *testing.T) {
	pp := startPlannerPeer(t)
	var st states
	c := dial(t, pp.url(), &client.Options{Token: client.StaticToken("tok"), OnStateChange: st.record})
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	resumed := make(chan bool, 1)
	var w *client.Watch
	w, err := c.PlannerWatch(ctx, "sess-1", &client.WatchOptions{OnResume: func(running bool) {
		mu.Lock()
		order = append(order, "resume")
		mu.Unlock()
		// Output sent during the hook waits until it returns.
		pp.output(map[string]any{"subscription": w.ID(), "session": "sess-1", "type": "text", "text": "after"})
		time.Sleep(50 * time.Millisecond)
		resumed <- running
	}})
	if err != nil {
		t.Fatal(err)
	}
	pp.mu.Lock()
	pp.running = true
	old := pp.conns[0]
	pp.mu.Unlock()
	_ = old.ws.Close(websocket.StatusGoingAway, "restart")
	select {
	case running := <-resumed:
		if !running || !w.Running() {
			t.Fatal("running not reported")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnResume not called")
	}
	out := <-w.Output()
	mu.Lock()
	order = append(order, "output "+out.Text)
	mu.Unlock()
	if !reflect.DeepEqual(order, []string{"resume", "output after"}) {
		t.Fatalf("order %v", order)
	}
	reqs := pp.takeRequests()
	want := []string{
		`planner.watch {"session":"sess-1","subscription":"` + w.ID() + `"}`,
		`planner.watch {"after":0,"session":"sess-1","subscription":"` + w.ID() + `"}`,
	}
	if !reflect.DeepEqual(reqs, want) {
		t.Fatalf("requests %v, want %v", reqs, want)
	}
	// A lagging close is repaired the same way.
	pp.mu.Lock()
	pc := pp.conns[len(pp.conns)-1]
	pp.mu.Unlock()
	if err := pc.rpc.Notify(ctx, "stream.closed", map[string]any{"subscription": w.ID(), "reason": "lagging"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-resumed:
	case <-time.After(30 * time.Second):
		t.Fatal("OnResume not called after lagging")
	}
	// forbidden ends the watch.
	if err := pc.rpc.Notify(ctx, "stream.closed", map[string]any{"subscription": w.ID(), "reason": "forbidden"}); err != nil {
		t.Fatal(err)
	}
	for range w.Output() {
	}
	if !errors.Is(w.Err(), protocol.ErrForbidden) {
		t.Fatalf("Err %v", w.Err())
	}
	if n := st.count(client.StateConnected); n != 2 {
		t.Fatalf("connected %d times", n)
	}
}
