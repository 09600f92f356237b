package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
)

// withPropagator installs p as the global propagator for the test, as a host program that
// uses OpenTelemetry does, and afterwards one that writes nothing, like the default.
func withPropagator(t *testing.T, p propagation.TextMapPropagator) {
	otel.SetTextMapPropagator(p)
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
}

func traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// meta returns params._meta of a request the peer recorded ("method {params}").
func meta(t *testing.T, request string) map[string]string {
	t.Helper()
	var p struct {
		Meta map[string]string `json:"_meta"`
	}
	_, params, _ := strings.Cut(request, " ")
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		t.Fatalf("%s: %v", request, err)
	}
	return p.Meta
}

func TestTraceContextInMetaAndUpgrade(t *testing.T) {
	withPropagator(t, propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")

	for _, c := range []codec.Codec{codec.MsgPack, codec.JSON} {
		t.Run(c.Name(), func(t *testing.T) {
			pp := startPlannerPeer(t)
			// The caller's trace came from elsewhere with a tracestate, and carries baggage.
			remote := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
			})
			ts, err := trace.ParseTraceState("vendor=opaque")
			if err != nil {
				t.Fatal(err)
			}
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote.WithTraceState(ts))
			m, _ := baggage.NewMember("tenant", "acme")
			bag, _ := baggage.New(m)
			ctx = baggage.ContextWithBaggage(ctx, bag)

			dctx, dial := tracer.Start(ctx, "dial")
			cl, err := client.Dial(dctx, pp.url(), &client.Options{Token: client.StaticToken("t"), Codec: c})
			dial.End()
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			pp.mu.Lock()
			h, auth := pp.headers[0], pp.auths[0]
			pp.mu.Unlock()
			if got, want := h.Get("Traceparent"), traceparent(dial.SpanContext()); got != want {
				t.Errorf("upgrade traceparent %q, want %q", got, want)
			}
			if h.Get("Tracestate") != "vendor=opaque" || h.Get("Baggage") != "tenant=acme" {
				t.Errorf("upgrade tracestate %q baggage %q", h.Get("Tracestate"), h.Get("Baggage"))
			}
			if got := meta(t, "auth "+auth)["traceparent"]; got != traceparent(dial.SpanContext()) {
				t.Errorf("auth's _meta.traceparent %q", got)
			}

			sctx, send := tracer.Start(ctx, "send")
			if _, err := cl.PlannerSend(sctx, "s1", "hello", nil); err != nil {
				t.Fatal(err)
			}
			send.End()
			if err := cl.PlannerCancel(context.Background(), "s1"); err != nil { // no span, no baggage: no _meta
				t.Fatal(err)
			}
			reqs := pp.takeRequests()
			if len(reqs) != 2 {
				t.Fatalf("requests %v", reqs)
			}
			want := map[string]string{"traceparent": traceparent(send.SpanContext()), "tracestate": "vendor=opaque", "baggage": "tenant=acme"}
			if got := meta(t, reqs[0]); len(got) != len(want) || got["traceparent"] != want["traceparent"] ||
				got["tracestate"] != want["tracestate"] || got["baggage"] != want["baggage"] {
				t.Errorf("planner.send's _meta %v, want %v (request %s)", got, want, reqs[0])
			}
			if got := meta(t, reqs[1]); got != nil {
				t.Errorf("an untraced request's _meta %v", got)
			}
		})
	}
}

// A host that installed no propagator (the global default) gets nothing written, even for
// a context with a recording span.
func TestNoPropagatorWritesNothing(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	defer span.End()
	if len(otel.GetTextMapPropagator().Fields()) != 0 {
		t.Fatal("a propagator is installed")
	}
	pp := startPlannerPeer(t)
	cl, err := client.Dial(ctx, pp.url(), &client.Options{Token: client.StaticToken("t"), Codec: codec.JSON})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.PlannerSend(ctx, "s1", "hello", nil); err != nil {
		t.Fatal(err)
	}
	reqs := pp.takeRequests()
	pp.mu.Lock()
	h, auth := pp.headers[0], pp.auths[0]
	pp.mu.Unlock()
	if len(reqs) != 1 || meta(t, reqs[0]) != nil || meta(t, "auth "+auth) != nil || h.Get("Traceparent") != "" {
		t.Fatalf("without a propagator: requests %v, auth %s, traceparent %q", reqs, auth, h.Get("Traceparent"))
	}
}
