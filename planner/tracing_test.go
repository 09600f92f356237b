package planner_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/planner"
)

// spans is a recording tracer provider for the planner's spans.
type spans struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newSpans(t testing.TB) *spans {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &spans{rec: rec, tp: tp}
}

// ended returns the ended spans of the trace, waiting until one of them is named last.
func (s *spans) ended(t testing.TB, tid trace.TraceID, last string) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	waitFor(t, "span "+last, func() bool {
		got = got[:0]
		for _, sp := range s.rec.Ended() {
			if sp.SpanContext().TraceID() == tid {
				got = append(got, sp)
			}
		}
		return slices.ContainsFunc(got, func(sp sdktrace.ReadOnlySpan) bool { return sp.Name() == last })
	})
	return got
}

// remoteParent returns ctx carrying a sampled span context from another process, as the
// gateway's request span would be for planner.send.
func remoteParent(ctx context.Context, seed byte) (context.Context, trace.SpanContext) {
	var tid trace.TraceID
	var sid trace.SpanID
	for i := range tid {
		tid[i] = seed + byte(i)
	}
	for i := range sid {
		sid[i] = seed + 0x40 + byte(i)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc), sc
}

func attrs(sp sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range sp.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs checks that sp has each attribute with the value given in its string form.
func wantAttrs(t *testing.T, sp sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := attrs(sp)
	for k, v := range want {
		if g, ok := got[attribute.Key(k)]; !ok || g.Emit() != v {
			t.Errorf("span %q: %s = %q (set %v), want %q", sp.Name(), k, g.Emit(), ok, v)
		}
	}
}

func named(all []sdktrace.ReadOnlySpan, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range all {
		if strings.HasPrefix(sp.Name(), prefix) {
			out = append(out, sp)
		}
	}
	slices.SortFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

// traced is a Service with a recording tracer provider and a session watched by alice.
type traced struct {
	*spans
	svc     *planner.Service
	session string
	w       *watcher
}

func newTraced(t *testing.T, o *planner.Options) *traced {
	t.Helper()
	var opts planner.Options
	if o != nil {
		opts = *o
	}
	b := newBackend(t, "memory")
	tr := &traced{spans: newSpans(t)}
	opts.TracerProvider = tr.tp
	tr.svc, _ = b.service(t, &opts, nil)
	tr.session = b.newSession(t, tr.svc)
	tr.w = watch(t, tr.svc, alice, tr.session)
	return tr
}

// send sends text under a remote parent made of seed and returns the parent, the turn's
// output and the spans of its trace once the turn's span ended.
func (tr *traced) send(t *testing.T, seed byte, text string) (trace.SpanContext, []planner.Output, []sdktrace.ReadOnlySpan) {
	t.Helper()
	ctx, parent := remoteParent(ctxT(t), seed)
	if _, err := tr.svc.Send(ctx, alice, tr.session, text); err != nil {
		t.Fatal(err)
	}
	out := tr.w.until(t, planner.OutputDone)
	return parent, out, tr.ended(t, parent.TraceID(), "invoke_agent planner")
}

func TestTurnSpans(t *testing.T) {
	tr := newTraced(t, nil)
	parent, out, all := tr.send(t, 1, "please plan")
	id := tr.session
	var callIDs []string
	for _, o := range out {
		if o.Type == planner.OutputToolCall {
			callIDs = append(callIDs, o.ToolUseID)
		}
	}

	turns := named(all, "invoke_agent ")
	if len(turns) != 1 {
		t.Fatalf("%d turn spans", len(turns))
	}
	turn := turns[0]
	if turn.Parent().SpanID() != parent.SpanID() || turn.SpanKind() != trace.SpanKindInternal {
		t.Fatalf("turn span's parent %v kind %v, want the send's %v", turn.Parent().SpanID(), turn.SpanKind(), parent.SpanID())
	}
	wantAttrs(t, turn, map[string]string{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "gen_ai.conversation.id": id,
		"gen_ai.provider.name": "scripted", "gen_ai.request.model": "script", "ballet.project": "WEB",
		"ballet.planner.turn.id": out[0].Turn, "ballet.planner.turn.done_reason": "end_turn", "ballet.planner.turn.rounds": "3",
	})
	if turn.Status().Code == codes.Error {
		t.Errorf("turn status %v", turn.Status())
	}

	chats := named(all, "chat ")
	if len(chats) != 3 {
		t.Fatalf("%d model-call spans, want 3", len(chats))
	}
	var input, output int64
	for i, sp := range chats {
		if sp.Name() != "chat script" || sp.Parent().SpanID() != turn.SpanContext().SpanID() || sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("model call %d: %q under %v, kind %v", i, sp.Name(), sp.Parent().SpanID(), sp.SpanKind())
		}
		finish := `["tool_use"]`
		if i == 2 {
			finish = `["end_turn"]`
		}
		wantAttrs(t, sp, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
			"gen_ai.request.model": "script", "gen_ai.response.finish_reasons": finish, "gen_ai.conversation.id": id,
			"ballet.planner.model.purpose": "answer", "ballet.planner.model.retries": "0"})
		a := attrs(sp)
		if a["gen_ai.usage.input_tokens"].AsInt64() <= 0 || a["gen_ai.usage.output_tokens"].AsInt64() <= 0 {
			t.Errorf("model call %d tokens: %v", i, a)
		}
		input += a["gen_ai.usage.input_tokens"].AsInt64()
		output += a["gen_ai.usage.output_tokens"].AsInt64()
	}
	wantAttrs(t, turn, map[string]string{"gen_ai.usage.input_tokens": fmt.Sprint(input), "gen_ai.usage.output_tokens": fmt.Sprint(output)})

	tools := named(all, "execute_tool ")
	if len(tools) != 2 || len(callIDs) != 2 {
		t.Fatalf("%d tool spans, %d tool calls", len(tools), len(callIDs))
	}
	for i, name := range []string{"create_item", "list_items"} {
		sp := tools[i]
		if sp.Name() != "execute_tool "+name || sp.Parent().SpanID() != turn.SpanContext().SpanID() {
			t.Errorf("tool span %d: %q under %v", i, sp.Name(), sp.Parent().SpanID())
		}
		wantAttrs(t, sp, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
			"gen_ai.tool.call.id": callIDs[i], "gen_ai.tool.type": "function", "ballet.planner.tool.is_error": "false"})
		// A tool runs after the model call that asked for it and before the next.
		if sp.StartTime().Before(chats[i].EndTime()) || sp.EndTime().After(chats[i+1].StartTime()) {
			t.Errorf("tool span %d is not between model calls %d and %d", i, i, i+1)
		}
	}
	if n := len(all); n != 6 {
		t.Errorf("%d spans in the trace, want 6", n)
	}
}

func TestTurnSpansOfFailures(t *testing.T) {
	tr := newTraced(t, nil)
	_, _, all := tr.send(t, 2, "missing items")
	tools := named(all, "execute_tool get_item")
	if len(tools) != 2 {
		t.Fatalf("%d tool spans", len(tools))
	}
	for i, typ := range []string{"not_found", "invalid_input"} {
		wantAttrs(t, tools[i], map[string]string{"error.type": typ, "ballet.planner.tool.is_error": "true"})
		if tools[i].Status().Code != codes.Error {
			t.Errorf("tool span %d status %v", i, tools[i].Status())
		}
	}

	_, _, all = tr.send(t, 3, "fail now")
	chats, turn := named(all, "chat "), named(all, "invoke_agent ")[0]
	if len(chats) != 1 || chats[0].Status().Code != codes.Error {
		t.Fatalf("model calls %d, status %v", len(chats), chats[0].Status())
	}
	wantAttrs(t, chats[0], map[string]string{"error.type": "server"})
	wantAttrs(t, turn, map[string]string{"error.type": "server", "ballet.planner.turn.done_reason": "error"})
	if turn.Status().Code != codes.Error || !strings.Contains(turn.Status().Description, "upstream exploded") {
		t.Errorf("turn status %v", turn.Status())
	}
}

func TestModelCallSpanCountsRetries(t *testing.T) {
	overloaded := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}
	api := newAnthropicAPI(t, overloaded, overloaded, anthropicStream([]string{"Hi ", "there."}))
	tr := newTraced(t, &planner.Options{Provider: api.provider(t), MaxTokens: 300})
	_, _, all := tr.send(t, 4, "hello")
	chats := named(all, "chat ")
	if len(chats) != 1 {
		t.Fatalf("%d model-call spans: one covers the call with its retries", len(chats))
	}
	sp := chats[0]
	wantAttrs(t, sp, map[string]string{"gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-4-5",
		"gen_ai.request.max_tokens": "300", "gen_ai.usage.input_tokens": "10", "gen_ai.usage.output_tokens": "12",
		"gen_ai.response.finish_reasons": `["end_turn"]`, "ballet.planner.model.retries": "2"})
	if sp.Name() != "chat claude-sonnet-4-5" || sp.Status().Code == codes.Error {
		t.Errorf("span %q status %v", sp.Name(), sp.Status())
	}
	var retries []string
	for _, ev := range sp.Events() {
		if ev.Name == "retry" {
			m := map[attribute.Key]attribute.Value{}
			for _, kv := range ev.Attributes {
				m[kv.Key] = kv.Value
			}
			retries = append(retries, m["ballet.planner.model.retry.attempt"].Emit()+" "+m["error.type"].Emit())
		}
	}
	if !slices.Equal(retries, []string{"1 overloaded", "2 overloaded"}) {
		t.Errorf("retry events %v", retries)
	}
}

func TestUntracedSendStartsItsOwnTrace(t *testing.T) {
	tr := newTraced(t, nil)
	if _, err := tr.svc.Send(ctxT(t), alice, tr.session, "hello"); err != nil {
		t.Fatal(err)
	}
	tr.w.until(t, planner.OutputDone)
	waitFor(t, "the turn's span", func() bool { return len(named(tr.rec.Ended(), "invoke_agent ")) == 1 })
	turn := named(tr.rec.Ended(), "invoke_agent ")[0]
	if turn.Parent().IsValid() || !turn.SpanContext().IsSampled() {
		t.Fatalf("turn of an untraced send: parent %v, sampled %v", turn.Parent(), turn.SpanContext().IsSampled())
	}
}

// Across replicas: the turn runs on the replica that took the send, whatever replica watches
// it, and is in the sender's trace; when that replica dies, the one that ends the turn for
// its watchers records that in the sender's trace too, from the trace context kept with the
// lease.
func TestTurnSpansAcrossReplicas(t *testing.T) {
	const lease = 1500 * time.Millisecond
	b := newBackend(t, "postgres")
	ra, rb := newSpans(t), newSpans(t)
	a, _ := b.service(t, &planner.Options{Lease: lease, TracerProvider: ra.tp}, nil)
	bb, _ := b.service(t, &planner.Options{Lease: lease, TracerProvider: rb.tp}, nil)
	id := b.newSession(t, a)
	wa, wb := watch(t, a, alice, id), watch(t, bb, alice, id)

	ctx, parent := remoteParent(ctxT(t), 5)
	if _, err := bb.Send(ctx, alice, id, "hello"); err != nil {
		t.Fatal(err)
	}
	wa.until(t, planner.OutputDone)
	wb.until(t, planner.OutputDone)
	turn := named(rb.ended(t, parent.TraceID(), "invoke_agent planner"), "invoke_agent ")[0]
	if turn.Parent().SpanID() != parent.SpanID() {
		t.Fatalf("turn span's parent %v, want the send's %v", turn.Parent().SpanID(), parent.SpanID())
	}

	ts, err := trace.ParseTraceState("vendor=opaque")
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent = remoteParent(context.Background(), 6)
	parent = parent.WithTraceState(ts)
	ctx = trace.ContextWithRemoteSpanContext(ctxT(t), parent)
	if _, err := a.Send(ctx, alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	wb.until(t, planner.OutputText)
	planner.Abandon(a)
	wb.until(t, planner.OutputDone)
	stale := rb.ended(t, parent.TraceID(), "planner.turn.stale")
	if len(stale) != 1 {
		t.Fatalf("the other replica recorded %d spans in the sender's trace", len(stale))
	}
	sp := stale[0]
	if sp.Parent().SpanID() != parent.SpanID() || sp.SpanContext().TraceState().String() != "vendor=opaque" {
		t.Fatalf("stale span's parent %v tracestate %q", sp.Parent().SpanID(), sp.SpanContext().TraceState())
	}
	wantAttrs(t, sp, map[string]string{"gen_ai.conversation.id": id, "error.type": "replica_stopped",
		"ballet.planner.turn.done_reason": "error"})
	if sp.Status().Code != codes.Error || sp.Status().Description != planner.StaleText {
		t.Errorf("stale span status %v", sp.Status())
	}
}

// traceStore records the span contexts under which a turn's writes reach the store.
type traceStore struct {
	planner.Store
	mu               sync.Mutex
	outputs, appends []trace.SpanContext
}

func (s *traceStore) AppendOutputs(ctx context.Context, b planner.OutputBatch) error {
	s.mu.Lock()
	for range b.Outputs {
		s.outputs = append(s.outputs, trace.SpanContextFromContext(ctx))
	}
	s.mu.Unlock()
	return s.Store.AppendOutputs(ctx, b)
}

func (s *traceStore) AppendMessage(ctx context.Context, session string, m planner.NewMessage) (*planner.Message, error) {
	s.mu.Lock()
	s.appends = append(s.appends, trace.SpanContextFromContext(ctx))
	s.mu.Unlock()
	return s.Store.AppendMessage(ctx, session, m)
}

// The writes of outputs (hundreds in one answer) are the replica's batches, outside every
// trace: the database records no span for them; the turn's span counts them. The writes of
// messages are in the turn's trace, sampled like the rest of it.
func TestOutputWritesRecordNoSpans(t *testing.T) {
	b := newBackend(t, "memory")
	st := &traceStore{Store: b.store}
	b.store = st
	rec := newSpans(t)
	svc, _ := b.service(t, &planner.Options{TracerProvider: rec.tp}, nil)
	id := b.newSession(t, svc)
	w := watch(t, svc, alice, id)
	ctx, parent := remoteParent(ctxT(t), 7)
	if _, err := svc.Send(ctx, alice, id, "please plan"); err != nil {
		t.Fatal(err)
	}
	out := w.until(t, planner.OutputDone)
	turn := named(rec.ended(t, parent.TraceID(), "invoke_agent planner"), "invoke_agent ")[0]
	wantAttrs(t, turn, map[string]string{"ballet.planner.turn.outputs": fmt.Sprint(len(out))})
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.outputs) != len(out) || len(st.appends) != 6 {
		t.Fatalf("%d outputs and %d messages stored", len(st.outputs), len(st.appends))
	}
	for i, sc := range st.outputs {
		if sc.IsValid() {
			t.Fatalf("output %d stored under the span %v of trace %v", i, sc.SpanID(), sc.TraceID())
		}
	}
	for i, sc := range st.appends {
		if sc.TraceID() != parent.TraceID() || !sc.IsSampled() {
			t.Fatalf("message %d stored under %v sampled %v", i, sc.TraceID(), sc.IsSampled())
		}
	}
}
