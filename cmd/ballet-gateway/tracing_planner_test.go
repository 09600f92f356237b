package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/otlptest"
)

// modelAnswer is one answer of the fake Messages API: text, or a tool call when tool is
// set, with the usage it reports.
type modelAnswer struct {
	text, tool, input string
	in, out           int
}

// fakeMessagesAPI is a loopback server speaking the Anthropic Messages API's SSE format:
// the n-th request gets answers[n], the last repeating.
func fakeMessagesAPI(t *testing.T, answers ...modelAnswer) *httptest.Server {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/messages" || r.Header.Get("x-api-key") != "sk-test" {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no"}}`, http.StatusNotFound)
			return
		}
		mu.Lock()
		a := answers[min(n, len(answers)-1)]
		n++
		mu.Unlock()
		ev := func(name string, data map[string]any) {
			data["type"] = name
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
			"content": []any{}, "model": "claude-test", "usage": map[string]int{"input_tokens": a.in, "output_tokens": 1}}})
		block := map[string]any{"type": "text", "text": ""}
		delta := map[string]any{"type": "text_delta", "text": a.text}
		stop := "end_turn"
		if a.tool != "" {
			block = map[string]any{"type": "tool_use", "id": "toolu_01", "name": a.tool, "input": map[string]any{}}
			delta = map[string]any{"type": "input_json_delta", "partial_json": a.input}
			stop = "tool_use"
		}
		ev("content_block_start", map[string]any{"index": 0, "content_block": block})
		ev("content_block_delta", map[string]any{"index": 0, "delta": delta})
		ev("content_block_stop", map[string]any{"index": 0})
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop}, "usage": map[string]int{"output_tokens": a.out}})
		ev("message_stop", map[string]any{})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// randomHex is n random bytes in hex: a trace or span id.
func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ofTrace returns the spans of trace tid.
func ofTrace(spans []otlptest.Span, tid string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range spans {
		if s.TraceID() == tid {
			out = append(out, s)
		}
	}
	return out
}

// finishReasons is the span's gen_ai.response.finish_reasons, a string array.
func finishReasons(s otlptest.Span) []string {
	var out []string
	for _, kv := range s.Attributes {
		if kv.Key == "gen_ai.response.finish_reasons" {
			for _, v := range kv.Value.GetArrayValue().GetValues() {
				out = append(out, v.GetStringValue())
			}
		}
	}
	return out
}

// TestPlannerTurnTraceAcrossReplicas: two `serve` replicas on one database, each exporting to
// its own OTLP receiver, the planner on a Messages API that first asks for a tool call and
// then answers. A watch on B, a planner.send on A with a sampled parent in _meta: A's
// receiver gets the send's span on that parent, the turn under it, two model calls and one
// tool call under the turn, with their attributes; B sends nothing of that trace. A send
// with an unsampled parent leaves no span of its trace anywhere.
func TestPlannerTurnTraceAcrossReplicas(t *testing.T) {
	api := fakeMessagesAPI(t,
		modelAnswer{tool: "create_item", input: `{"title": "From the model"}`, in: 31, out: 17},
		modelAnswer{text: "Created WEB-1.", in: 57, out: 5})
	c := newCluster(t, 0, "BALLET_PLANNER_PROVIDER=anthropic", "BALLET_PLANNER_BASE_URL="+api.URL,
		"BALLET_PLANNER_API_KEY=sk-test", "BALLET_PLANNER_MODEL=claude-test")
	rcvA, rcvB := otlptest.NewReceiver(t), otlptest.NewReceiver(t)
	otel := func(r *otlptest.Receiver) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.BaseURL(), "OTEL_BSP_SCHEDULE_DELAY=100"}
	}
	a, b := c.serve(otel(rcvA)...), c.serve(otel(rcvB)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica A:\n%s\nreplica B:\n%s", a.p.output(), b.p.output())
		}
	})
	session := c.session(a, c.token("alice"))
	watcher := c.dialJSON(b, "alice")
	watcher.call("planner.watch", map[string]any{"subscription": "w", "session": session})
	sender := c.dialJSON(a, "alice")

	tid, parent := randomHex(t, 16), randomHex(t, 8)
	sender.call("planner.send", map[string]any{"session": session, "text": "add an item",
		"_meta": map[string]string{"traceparent": "00-" + tid + "-" + parent + "-01"}})
	if outs := watcher.outputs(); outs[len(outs)-1] != "done:end_turn" {
		t.Fatalf("watcher on B: %v", outs)
	}

	const wait = 30 * time.Second
	inTrace := func(name string) func(otlptest.Span) bool {
		return func(s otlptest.Span) bool { return s.Name == name && s.TraceID() == tid }
	}
	send := rcvA.WaitFor(t, wait, "planner.send", inTrace("planner.send"))
	turn := rcvA.WaitFor(t, wait, "invoke_agent planner", inTrace("invoke_agent planner"))
	tool := rcvA.WaitFor(t, wait, "execute_tool create_item", inTrace("execute_tool create_item"))
	for _, finish := range []string{"tool_use", "end_turn"} {
		rcvA.WaitFor(t, wait, "chat claude-test finishing "+finish, func(s otlptest.Span) bool {
			f := finishReasons(s)
			return inTrace("chat claude-test")(s) && len(f) == 1 && f[0] == finish
		})
	}
	if send.ParentID() != parent || send.Kind.String() != "SPAN_KIND_SERVER" {
		t.Errorf("planner.send: parent %s kind %s, want %s, server", send.ParentID(), send.Kind, parent)
	}
	instA := send.Resource["service.instance.id"]
	if instA == "" {
		t.Fatalf("planner.send: resource %v has no service.instance.id", send.Resource)
	}
	if m, _ := send.Attr("rpc.method"); m != "planner.send" {
		t.Errorf("planner.send: rpc.method %q", m)
	}
	if turn.ParentID() != send.SpanID() {
		t.Errorf("invoke_agent planner: parent %s, want planner.send's %s", turn.ParentID(), send.SpanID())
	}
	wantAttrs := func(s otlptest.Span, attrs map[string]string) {
		t.Helper()
		for k, want := range attrs {
			if got, ok := s.Attr(k); !ok || got != want {
				t.Errorf("%s: %s = %q (%v), want %q", s.Name, k, got, ok, want)
			}
		}
	}
	wantAttrs(turn, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner",
		"gen_ai.conversation.id": session, "gen_ai.request.model": "claude-test", "ballet.project": "WEB",
		"ballet.planner.turn.done_reason": "end_turn", "ballet.planner.turn.rounds": "2",
		"gen_ai.usage.input_tokens": "88", "gen_ai.usage.output_tokens": "22"})

	var chats []otlptest.Span
	for _, s := range ofTrace(rcvA.Spans(), tid) {
		if s.Resource["service.instance.id"] != instA {
			t.Errorf("%s: from instance %s, want A's %s", s.Name, s.Resource["service.instance.id"], instA)
		}
		if s.Name == "chat claude-test" {
			chats = append(chats, s)
		}
	}
	if len(chats) != 2 {
		t.Fatalf("%d chat spans in the trace, want 2", len(chats))
	}
	// By their start: the call that asked for the tool, then the one that answered.
	if chats[1].StartTimeUnixNano < chats[0].StartTimeUnixNano {
		chats[0], chats[1] = chats[1], chats[0]
	}
	for i, want := range []struct {
		in, out, finish string
	}{{"31", "17", "tool_use"}, {"57", "5", "end_turn"}} {
		s := chats[i]
		if s.ParentID() != turn.SpanID() || s.Kind.String() != "SPAN_KIND_CLIENT" {
			t.Errorf("chat %d: parent %s kind %s, want the turn's %s, client", i, s.ParentID(), s.Kind, turn.SpanID())
		}
		wantAttrs(s, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-test",
			"gen_ai.provider.name": "anthropic", "gen_ai.usage.input_tokens": want.in,
			"gen_ai.usage.output_tokens": want.out, "ballet.planner.model.retries": "0"})
		if f := finishReasons(s); len(f) != 1 || f[0] != want.finish {
			t.Errorf("chat %d: gen_ai.response.finish_reasons %v, want [%s]", i, f, want.finish)
		}
	}
	if tool.ParentID() != turn.SpanID() {
		t.Errorf("execute_tool: parent %s, want the turn's %s", tool.ParentID(), turn.SpanID())
	}
	wantAttrs(tool, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_item",
		"gen_ai.tool.call.id": "toolu_01", "ballet.planner.tool.is_error": "false"})
	if tool.StartTimeUnixNano < chats[0].EndTimeUnixNano || tool.EndTimeUnixNano > chats[1].StartTimeUnixNano {
		t.Error("execute_tool did not run between the two model calls")
	}

	// B's watch is its own trace: B has the planner.watch span, and nothing of the send's.
	watch := rcvB.WaitFor(t, wait, "planner.watch", otlptest.Named("planner.watch"))
	if watch.TraceID() == tid || watch.Resource["service.instance.id"] == instA {
		t.Errorf("planner.watch: trace %s on %s", watch.TraceID(), watch.Resource["service.instance.id"])
	}

	// An unsampled parent: the turn runs, and no span of its trace is exported. A sampled
	// ping on each replica afterwards is exported after anything the turn ended before it.
	unsampled := randomHex(t, 16)
	sender.call("planner.send", map[string]any{"session": session, "text": "and now?",
		"_meta": map[string]string{"traceparent": "00-" + unsampled + "-" + randomHex(t, 8) + "-00"}})
	if outs := watcher.outputs(); outs[len(outs)-1] != "done:end_turn" {
		t.Fatalf("watcher on B, second turn: %v", outs)
	}
	after := randomHex(t, 16)
	ping := map[string]any{"_meta": map[string]string{"traceparent": "00-" + after + "-" + randomHex(t, 8) + "-01"}}
	sender.call("system.ping", ping)
	watcher.call("system.ping", ping)
	for _, r := range []*otlptest.Receiver{rcvA, rcvB} {
		r.WaitFor(t, wait, "the later ping", func(s otlptest.Span) bool { return s.TraceID() == after })
	}
	time.Sleep(500 * time.Millisecond) // five schedule delays more, for a span that ended late
	for who, r := range map[string]*otlptest.Receiver{"A": rcvA, "B": rcvB} {
		for _, s := range ofTrace(r.Spans(), unsampled) {
			t.Errorf("replica %s exported %s of the unsampled trace", who, s.Name)
		}
		if who == "B" {
			for _, s := range ofTrace(r.Spans(), tid) {
				t.Errorf("replica B exported %s of the send's trace", s.Name)
			}
		}
	}
	// One connected trace: every span of it on A has its parent in it, but the send's.
	all := ofTrace(rcvA.Spans(), tid)
	ids := map[string]bool{parent: true}
	for _, s := range all {
		ids[s.SpanID()] = true
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
		if !ids[s.ParentID()] {
			t.Errorf("%s: parent %q is not in the trace", s.Name, s.ParentID())
		}
	}
	t.Logf("trace %s on A: %s", tid, strings.Join(names, ", "))
}
