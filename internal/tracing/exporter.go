//go:build !nootlp

package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newExporter is the OTLP/HTTP (protobuf) exporter to o.Endpoint. It links the OTLP protobuf
// types and, through them, gRPC and grpc-gateway into the binary; -tags nootlp leaves them out.
func newExporter(o *Options) (sdktrace.SpanExporter, error) {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(o.Endpoint),
		otlptracehttp.WithHeaders(o.Headers))
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	return exp, nil
}
