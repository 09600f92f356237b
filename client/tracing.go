package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/vmihailenco/msgpack/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/ballet/gateway/codec"
)

// metaField is the params field that carries a request's trace context, as the OpenTelemetry
// conventions for JSON-RPC over one long-lived connection put it.
const metaField = "_meta"

// traceContext returns the fields the host program's propagator (otel.GetTextMapPropagator)
// writes for ctx, nil when it writes none: without a propagator installed, or without a
// span or baggage in ctx.
func traceContext(ctx context.Context) propagation.MapCarrier {
	p := otel.GetTextMapPropagator()
	if len(p.Fields()) == 0 {
		return nil // the default: no allocation for a map that would stay empty
	}
	carrier := propagation.MapCarrier{}
	p.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// withTraceContext returns params with ctx's trace context in params._meta, encoded by c,
// or params unchanged when there is none to add or params are not an object.
func withTraceContext(ctx context.Context, c codec.Codec, params any) (any, error) {
	meta := traceContext(ctx)
	if meta == nil {
		return params, nil
	}
	if params == nil {
		params = struct{}{}
	}
	body, err := c.Marshal(params)
	if err != nil {
		return nil, err
	}
	if codec.IsArray(c, body) {
		return params, nil
	}
	body, err = codec.PrependField(c, body, metaField, map[string]string(meta))
	if err != nil {
		return params, nil // not an object: sent as it is, the server says what it thinks
	}
	if c.Binary() {
		return msgpack.RawMessage(body), nil
	}
	return json.RawMessage(body), nil
}

// handshakeHeader returns the handshake's headers: the configured ones and ctx's trace
// context.
func handshakeHeader(ctx context.Context, h http.Header) http.Header {
	meta := traceContext(ctx)
	if meta == nil {
		return h
	}
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	for k, v := range meta {
		h.Set(k, v)
	}
	return h
}
