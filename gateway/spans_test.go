package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/otlptest"
	"github.com/ballet/gateway/internal/tracing"
)

// Trace contexts the tests send: a sampled and an unsampled parent, and a malformed one.
const (
	callerTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan    = "00f067aa0ba902b7"
	sampled       = "00-" + callerTrace + "-" + callerSpan + "-01"
	unsampledID   = "5bf92f3577b34da6a3ce929d0e0e4736"
	unsampled     = "00-" + unsampledID + "-" + callerSpan + "-00"
	malformed     = "00-" + callerTrace + "-" + callerSpan + "-0z"
	spanWait      = 30 * time.Second
	unknownParent = ""
)

// tracedEnv runs a gateway whose spans go to an OTLP receiver; flush exports what has ended.
func tracedEnv(t testing.TB, o *gatewaytest.Options) (env *gatewaytest.Env, rcv *otlptest.Receiver, flush func()) {
	return tracedEnvAt(t, o, 1)
}

// tracedEnvAt is tracedEnv sampling ratio of the traces the gateway starts.
func tracedEnvAt(t testing.TB, o *gatewaytest.Options, ratio float64) (env *gatewaytest.Env, rcv *otlptest.Receiver, flush func()) {
	t.Helper()
	rcv = otlptest.NewReceiver(t)
	tp, err := tracing.NewProvider(&tracing.Options{Endpoint: rcv.Endpoint(), ServiceName: "ballet-gateway",
		Sampler: tracing.ParentBasedTraceIDRatio, Ratio: ratio, BatchTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	if o == nil {
		o = &gatewaytest.Options{}
	}
	o.TracerProvider = tp
	env = gatewaytest.Start(t, o)
	return env, rcv, func() { forceFlush(t, tp) }
}

func forceFlush(t testing.TB, tp *sdktrace.TracerProvider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), spanWait)
	defer cancel()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}

func inTrace(id, name string) func(otlptest.Span) bool {
	return func(s otlptest.Span) bool { return s.TraceID() == id && s.Name == name }
}

func wantAttr(t *testing.T, s otlptest.Span, key, want string) {
	t.Helper()
	if got, ok := s.Attr(key); !ok || got != want {
		t.Errorf("span %s: %s = %q (set %v), want %q", s.Name, key, got, ok, want)
	}
}

// spansOfTrace are the received spans of trace id.
func spansOfTrace(rcv *otlptest.Receiver, id string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range rcv.Spans() {
		if s.TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// A REST request joins its caller's sampled trace, an unsampled one records nothing, and a
// malformed traceparent is ignored: a fresh root.
func TestSpansOfRESTRequests(t *testing.T) {
	env, rcv, flush := tracedEnv(t, &gatewaytest.Options{Tracker: true})
	env.Project(t, "WEB", "alice", "viewer")
	get := func(traceparent string) {
		req, _ := http.NewRequest(http.MethodGet, env.BaseURL+"/api/v1/projects/WEB/items", nil)
		req.Header.Set("Authorization", "Bearer "+env.Token(t, "alice"))
		req.Header.Set("traceparent", traceparent)
		req.Header.Set("tracestate", "vendor=1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET: %d", res.StatusCode)
		}
		if res.Header.Get("traceparent") != "" || res.Header.Get("tracestate") != "" {
			t.Error("the answer echoes the trace context")
		}
	}
	get(sampled)
	s := rcv.WaitFor(t, spanWait, "of the REST request", inTrace(callerTrace, "GET /api/v1/projects/{project}/items"))
	if s.ParentID() != callerSpan || s.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("parent %s kind %v, want %s, server", s.ParentID(), s.Kind, callerSpan)
	}
	if s.TraceState != "vendor=1" {
		t.Errorf("tracestate %q", s.TraceState)
	}
	wantAttr(t, s, "http.request.method", "GET")
	wantAttr(t, s, "http.route", "/api/v1/projects/{project}/items")
	wantAttr(t, s, "http.response.status_code", "200")
	wantAttr(t, s, "url.path", "/api/v1/projects/WEB/items")
	if s.Resource["service.name"] != "ballet-gateway" {
		t.Errorf("resource %v", s.Resource)
	}

	before := len(rcv.Spans())
	get(unsampled)
	get(malformed)
	flush()
	if got := spansOfTrace(rcv, unsampledID); len(got) != 0 {
		t.Errorf("an unsampled parent recorded %d spans", len(got))
	}
	var fresh []otlptest.Span
	for _, s := range rcv.Spans()[before:] {
		if s.TraceID() != callerTrace && s.Name == "GET /api/v1/projects/{project}/items" {
			fresh = append(fresh, s)
		}
	}
	if len(fresh) != 1 || fresh[0].ParentID() != unknownParent {
		t.Errorf("a malformed traceparent: %d spans %v, want one fresh root", len(fresh), fresh)
	}
}

// The upgrade joins its caller's trace, and auth is its child; a request with
// params._meta.traceparent is parented on that, in both codecs, and stream.subscribe says what
// it replayed and from where.
func TestSpansOfRPCRequests(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		env, rcv, flush := tracedEnv(t, nil)
		env.Project(t, "WEB", "alice", "viewer")
		first := appendN(t, env, itemEvent("WEB", "WEB-1", "item.created", 1))
		appendN(t, env, itemEvent("WEB", "WEB-1", "item.updated", 2))
		hdr := http.Header{"Traceparent": {sampled}}
		ws, err := dialRaw(t, env.URL, []string{c.Name()}, hdr)
		if err != nil {
			t.Fatal(err)
		}
		k := newClient(t, ws, c)
		k.mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, nil)
		up := rcv.WaitFor(t, spanWait, "of the upgrade", inTrace(callerTrace, "GET /rpc"))
		if up.ParentID() != callerSpan {
			t.Errorf("upgrade parent %s", up.ParentID())
		}
		wantAttr(t, up, "http.response.status_code", "101")
		wantAttr(t, up, "http.route", "/rpc")
		auth := rcv.WaitFor(t, spanWait, "of auth", inTrace(callerTrace, "auth"))
		if auth.ParentID() != up.SpanID() {
			t.Errorf("auth's parent %s, want the upgrade %s", auth.ParentID(), up.SpanID())
		}

		const reqTrace = "6bf92f3577b34da6a3ce929d0e0e4736"
		const reqSpan = "10f067aa0ba902b7"
		k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB", "from_seq": first - 1,
			"_meta": map[string]string{"traceparent": "00-" + reqTrace + "-" + reqSpan + "-01", "tracestate": "a=b", "baggage": "k=v"}}, nil)
		sub := rcv.WaitFor(t, spanWait, "of stream.subscribe", inTrace(reqTrace, "stream.subscribe"))
		if sub.ParentID() != reqSpan || sub.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("parent %s kind %v", sub.ParentID(), sub.Kind)
		}
		wantAttr(t, sub, "rpc.system.name", "jsonrpc")
		wantAttr(t, sub, "rpc.method", "stream.subscribe")
		wantAttr(t, sub, "ballet.replay.events", "2")
		wantAttr(t, sub, "ballet.replay.source", "memory")
		wantAttr(t, sub, "ballet.stream", "project:WEB")
		if _, ok := sub.Attr("rpc.response.status_code"); ok {
			t.Error("a success has rpc.response.status_code")
		}

		// A failure carries its code.
		const errTrace = "7bf92f3577b34da6a3ce929d0e0e4736"
		k.wantError("stream.subscribe", map[string]any{"subscription": "x", "stream": "project:NOPE",
			"_meta": map[string]string{"traceparent": "00-" + errTrace + "-" + reqSpan + "-01"}}, -32004)
		failed := rcv.WaitFor(t, spanWait, "of the refused stream.subscribe", inTrace(errTrace, "stream.subscribe"))
		wantAttr(t, failed, "rpc.response.status_code", "-32004")
		wantAttr(t, failed, "error.type", "-32004")
		if failed.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("status %v", failed.Status)
		}

		// Unsampled: nothing; malformed or of another type: ignored, a fresh root linked to the
		// upgrade; neither is refused.
		before := len(rcv.Spans())
		k.mustCall("system.ping", map[string]any{"_meta": map[string]string{"traceparent": unsampled}}, nil)
		k.mustCall("system.ping", map[string]any{"_meta": map[string]string{"traceparent": malformed}}, nil)
		k.mustCall("system.ping", map[string]any{"_meta": "not an object"}, nil)
		flush()
		if got := spansOfTrace(rcv, unsampledID); len(got) != 0 {
			t.Errorf("an unsampled parent recorded %d spans", len(got))
		}
		var roots int
		for _, s := range rcv.Spans()[before:] {
			if s.Name != "system.ping" {
				continue
			}
			if s.TraceID() == callerTrace || s.ParentID() != unknownParent {
				t.Errorf("ping in trace %s under %s, want a fresh root", s.TraceID(), s.ParentID())
			}
			if len(s.Links) != 1 || string(s.Links[0].SpanId) != string(auth.Span.ParentSpanId) {
				t.Errorf("ping links %v, want the upgrade", s.Links)
			}
			roots++
		}
		if roots != 2 {
			t.Errorf("%d fresh roots, want 2", roots)
		}
	})
}

// A replay read from the database says so, and the queries it ran are its children.
func TestSpansOfDatabaseWork(t *testing.T) {
	env, rcv, _ := tracedEnv(t, &gatewaytest.Options{Postgres: true, RecentBytes: 1})
	env.Project(t, "WEB", "alice", "viewer")
	appendN(t, env, itemEvent("WEB", "WEB-1", "item.created", 1))
	k := login(t, env, codec.MsgPack, "alice")
	const reqTrace = "8bf92f3577b34da6a3ce929d0e0e4736"
	k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB", "from_seq": 0,
		"_meta": map[string]string{"traceparent": "00-" + reqTrace + "-" + callerSpan + "-01"}}, nil)
	sub := rcv.WaitFor(t, spanWait, "of stream.subscribe", inTrace(reqTrace, "stream.subscribe"))
	wantAttr(t, sub, "ballet.replay.source", "database")
	q := rcv.WaitFor(t, spanWait, "of a query", func(s otlptest.Span) bool {
		return s.TraceID() == reqTrace && s.ParentID() == sub.SpanID() && s.Kind == tracepb.Span_SPAN_KIND_CLIENT
	})
	wantAttr(t, q, "db.system.name", "postgresql")
	if text, _ := q.Attr("db.query.text"); !strings.Contains(strings.ToUpper(text), "SELECT") {
		t.Errorf("db.query.text %q", text)
	}
}

// _meta is accepted on every method, in both codecs, with tracing off as on.
func TestMetaIsNeverRefused(t *testing.T) {
	meta := map[string]string{"traceparent": sampled, "tracestate": "a=b", "baggage": "k=v"}
	calls := []struct {
		method string
		params map[string]any
	}{
		{"system.ping", map[string]any{}},
		{"auth.refresh", nil}, // the token is added below
		{"stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}},
		{"presence.get", map[string]any{"stream": "project:WEB"}},
		{"stream.unsubscribe", map[string]any{"subscription": "s"}},
	}
	for _, traced := range []bool{false, true} {
		forEachCodec(t, func(t *testing.T, c codec.Codec) {
			var env *gatewaytest.Env
			if traced {
				env, _, _ = tracedEnv(t, nil)
			} else {
				env = gatewaytest.Start(t, nil)
			}
			env.Project(t, "WEB", "alice", "viewer")
			k := dial(t, env.URL, c)
			k.mustCall("auth", map[string]any{"token": env.Token(t, "alice"), "_meta": meta}, nil)
			for _, call := range calls {
				params := map[string]any{"_meta": meta}
				for k, v := range call.params {
					params[k] = v
				}
				if call.method == "auth.refresh" {
					params["token"] = env.Token(t, "alice")
				}
				k.mustCall(call.method, params, nil)
			}
			k.notify("$/heartbeat", map[string]any{"_meta": meta})
			k.mustCall("system.ping", map[string]any{"_meta": meta}, nil)
		})
	}
}

// With tracing on, the logs' trace_id is the span's, also where the caller sent none.
func TestLogsCarryTheSpansTraceID(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env, rcv, flush := tracedEnv(t, &gatewaytest.Options{Tracker: true, Logger: logger})
	env.Project(t, "WEB", "alice", "viewer")
	k := login(t, env, codec.JSON, "alice")
	req, _ := http.NewRequest(http.MethodGet, env.BaseURL+"/api/v1/projects/WEB/items", nil)
	req.Header.Set("Authorization", "Bearer "+env.Token(t, "alice"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	k.hangUp()
	flush()
	var rest, up string
	for _, s := range rcv.Spans() {
		switch s.Name {
		case "GET /api/v1/projects/{project}/items":
			rest = s.TraceID()
		case "GET /rpc":
			up = s.TraceID()
		}
	}
	if rest == "" || up == "" {
		t.Fatalf("spans %v", rcv.Spans())
	}
	eventually(t, "the connection is closed", func() bool { return strings.Contains(buf.String(), `"msg":"connection closed"`) })
	out := buf.String()
	if !strings.Contains(out, `"msg":"http request"`) || !strings.Contains(out, `"msg":"connection opened"`) {
		t.Fatalf("no REST or connection line:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, `"msg":"http request"`) && !strings.Contains(line, `"trace_id":"`+rest+`"`):
			t.Errorf("REST line without its span's trace id %s: %s", rest, line)
		case strings.Contains(line, `"msg":"connection opened"`) && !strings.Contains(line, `"trace_id":"`+up+`"`):
			t.Errorf("connection line without its upgrade's trace id %s: %s", up, line)
		}
	}
}

// A POST /rpc's request joins its caller's traceparent header: the POST's span is its child,
// and the method's span the POST's.
func TestSpansOfPostRequests(t *testing.T) {
	env, rcv, _ := tracedEnv(t, nil)
	env.Project(t, "WEB", "alice", "viewer")
	p := postRPC(t, env, env.Token(t, "alice"), `{"jsonrpc":"2.0","id":1,"method":"stream.subscribe","params":{"subscription":"s","stream":"project:WEB"}}`,
		http.Header{"Traceparent": {sampled}})
	if l := p.mustNext(); l.Error != nil {
		t.Fatalf("answer %+v", l)
	}
	post := rcv.WaitFor(t, spanWait, "of the POST", inTrace(callerTrace, "POST /rpc"))
	if post.ParentID() != callerSpan {
		t.Errorf("POST's parent %s, want the caller's %s", post.ParentID(), callerSpan)
	}
	wantAttr(t, post, "http.response.status_code", "200")
	sub := rcv.WaitFor(t, spanWait, "of stream.subscribe", inTrace(callerTrace, "stream.subscribe"))
	if sub.ParentID() != post.SpanID() {
		t.Errorf("stream.subscribe's parent %s, want the POST %s", sub.ParentID(), post.SpanID())
	}
	wantAttr(t, sub, "ballet.stream", "project:WEB")
}
