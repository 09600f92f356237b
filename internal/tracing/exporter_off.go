//go:build nootlp

package tracing

import (
	"errors"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrNoExporter is Start's error in a build without the OTLP exporter (-tags nootlp) when an
// endpoint is set.
var ErrNoExporter = errors.New("tracing: this build has no OTLP exporter (built with -tags nootlp); " +
	"unset OTEL_EXPORTER_OTLP_ENDPOINT or use a build without the tag")

func newExporter(*Options) (sdktrace.SpanExporter, error) { return nil, ErrNoExporter }
