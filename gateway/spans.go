// The server's spans (docs/tracing.md): one for each REST request, one for the /rpc upgrade,
// one for each JSON-RPC request. Without Options.TracerProvider none is started and nothing
// is read for them.

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/edge"
	"github.com/ballet/gateway/internal/tracing"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// The gateway's own span attributes, beyond the semantic conventions'.
const (
	attrConnection   = attribute.Key("ballet.connection.id")   // the connection's id, as logs give it
	attrStream       = attribute.Key("ballet.stream")          // stream.subscribe's stream
	attrReplayEvents = attribute.Key("ballet.replay.events")   // events stream.subscribe replayed
	attrReplayFrom   = attribute.Key("ballet.replay.source")   // where they were read: memory, database
	attrSubscription = attribute.Key("ballet.subscription.id") // the subscription's id
)

// tracerName names the gateway's instrumentation scope.
const tracerName = "github.com/ballet/gateway/gateway"

// startHTTP starts the server span of an HTTP request, parented on its traceparent and
// tracestate headers when they are valid (a malformed one is ignored: a fresh root).
func (s *Server) startHTTP(r *http.Request) (context.Context, trace.Span) {
	ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	method := r.Method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
	default:
		method = "_OTHER"
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method), semconv.URLPath(s.clientText(r.URL.Path)), semconv.URLScheme("http"),
		semconv.NetworkProtocolVersion(strings.TrimPrefix(r.Proto, "HTTP/")),
	}
	if host, port, err := net.SplitHostPort(r.Host); err == nil {
		attrs = append(attrs, semconv.ServerAddress(s.clientText(host)))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	} else if r.Host != "" {
		attrs = append(attrs, semconv.ServerAddress(s.clientText(r.Host)))
	}
	if a := s.clientAddr(r); a.IsValid() {
		attrs = append(attrs, semconv.ClientAddress(a.String()))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(s.clientText(ua)))
	}
	return s.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// clientText is a client's text cut to the tracer's limit of an attribute value, as the SDK
// would cut it, and copied when cut: the SDK's cut keeps the whole string's memory, which the
// span holds until it is exported.
func (s *Server) clientText(v string) string {
	if len(v) <= s.attrLen {
		return v // no more characters than bytes
	}
	n := 0
	for at := range v {
		if n == s.attrLen {
			return strings.Clone(v[:at])
		}
		n++
	}
	return v
}

// endHTTP ends an HTTP server span with its route (a pattern of the REST API; none for a path
// no route serves) and status.
func endHTTP(span trace.Span, method, route string, status int) {
	name := method
	if route != "" && route != "/" {
		span.SetAttributes(semconv.HTTPRoute(route))
		name += " " + route
	}
	span.SetName(name)
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// traced serves a REST request under its server span.
func (s *Server) traced(h http.Handler, w *edge.StatusWriter, r *http.Request) string {
	ctx, span := s.startHTTP(r)
	r = r.WithContext(ctx)
	h.ServeHTTP(w, r)
	// The API's ServeMux has set the pattern it matched on this request.
	_, route, _ := strings.Cut(r.Pattern, " ")
	if route == "" {
		route = r.Pattern
	}
	endHTTP(span, r.Method, route, w.Status)
	return traceIDOf(span)
}

// traceIDOf is the span's trace id, "" when it has none.
func traceIDOf(span trace.Span) string {
	if sc := span.SpanContext(); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// upgradeWriter notes the upgrade's status and lets the WebSocket library hijack.
type upgradeWriter struct{ *edge.StatusWriter }

func (w *upgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// metaParams is what every request's params may carry for tracing: _meta with W3C trace
// context, as the OpenTelemetry conventions for JSON-RPC over MCP carry it.
type metaParams struct {
	Meta *traceMeta `json:"_meta"`
}

var metaKey = []byte("_meta")

type traceMeta struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate"`
	Baggage     string `json:"baggage"`
}

// Get, Set and Keys make traceMeta a propagation.TextMapCarrier.
func (m *traceMeta) Get(key string) string {
	switch key {
	case "traceparent":
		return m.Traceparent
	case "tracestate":
		return m.Tracestate
	case "baggage":
		return m.Baggage
	}
	return ""
}

func (m *traceMeta) Set(string, string) {}

func (m *traceMeta) Keys() []string { return []string{"traceparent", "tracestate", "baggage"} }

// requestParent is the context a request's span starts from: the trace context of its
// params._meta when valid; else, for auth, the upgrade's span; else none (a fresh root,
// linked to the upgrade's span). Anything wrong in _meta is ignored.
func (s *session) requestParent(ctx context.Context, req *rpc.Request) (context.Context, []trace.SpanStartOption) {
	// Params without the key are not decoded again (both codecs spell keys out).
	if c := s.conn.Codec(); bytes.Contains(req.Params, metaKey) && !codec.IsArray(c, req.Params) {
		var mp metaParams
		if c.Unmarshal(req.Params, &mp) == nil && mp.Meta != nil {
			if pctx := tracing.Propagator.Extract(ctx, mp.Meta); trace.SpanContextFromContext(pctx).IsValid() {
				return pctx, nil
			}
		}
	}
	if s.trace == nil || !s.trace.span.IsValid() {
		return ctx, nil
	}
	if req.Method == protocol.Auth || s.http {
		return trace.ContextWithSpanContext(ctx, s.trace.span), nil
	}
	return ctx, []trace.SpanStartOption{trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: s.trace.span})}
}

// startRequest starts a JSON-RPC request's server span.
func (s *session) startRequest(ctx context.Context, req *rpc.Request) (context.Context, trace.Span) {
	ctx, opts := s.requestParent(ctx, req)
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.RPCSystemNameJSONRPC, semconv.RPCMethod(methodLabel(req.Method)),
		semconv.JSONRPCProtocolVersion("2.0"), semconv.JSONRPCRequestID(strconv.FormatInt(req.ID, 10)),
		attrConnection.String(s.connID()),
	))
	return s.srv.tracer.Start(ctx, methodLabel(req.Method), opts...)
}

// endRequest ends a request's span: an error answer's code is its rpc.response.status_code
// and error.type.
func endRequest(span trace.Span, err error) {
	if err != nil {
		code := strconv.Itoa(rpc.Code(errOrNil(err)))
		span.SetAttributes(semconv.RPCResponseStatusCode(code), semconv.ErrorTypeKey.String(code))
		span.SetStatus(codes.Error, shorten(err.Error(), 256))
	}
	span.End()
}

// noteReplay tells the stream.subscribe span what it replayed and from where.
func noteReplay(ctx context.Context, stream string, sub *streams.Subscription) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrStream.String(stream), attrSubscription.String(sub.ID()))
	if source := sub.ReplaySource(); source != "" {
		span.SetAttributes(attrReplayEvents.Int(sub.Replayed()), attrReplayFrom.String(source))
	}
}
