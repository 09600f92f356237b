// Package tracing starts OpenTelemetry tracing for a command: an OTLP exporter over HTTP
// (protobuf), a sampler, and the resource that names the process, installed as the global
// tracer provider with the W3C trace-context and baggage propagator, so that every package
// that asks otel.Tracer for its tracer records into it.
//
// Entry points: Start, with the Options the command read from its environment; QueryTracer,
// the spans of a pgx pool's queries. Caveat: Start installs globals, so a process starts
// tracing once; with Options.Endpoint empty it installs nothing and tracing costs nothing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Sampler names, as OTEL_TRACES_SAMPLER spells them.
const (
	AlwaysOn                = "always_on"
	AlwaysOff               = "always_off"
	TraceIDRatio            = "traceidratio"
	ParentBasedAlwaysOn     = "parentbased_always_on"
	ParentBasedAlwaysOff    = "parentbased_always_off"
	ParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// Samplers are the sampler names Start knows.
var Samplers = []string{AlwaysOn, AlwaysOff, TraceIDRatio, ParentBasedAlwaysOn, ParentBasedAlwaysOff, ParentBasedTraceIDRatio}

// Options say where spans go and which are kept.
type Options struct {
	// Endpoint is the full URL spans are posted to (…/v1/traces); empty means tracing is off.
	Endpoint string
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_HEADERS).
	Headers map[string]string
	// Sampler is one of Samplers; empty means ParentBasedAlwaysOn.
	Sampler string
	// Ratio is the ratio of the traceidratio samplers, in [0, 1]; it applies where this
	// process starts a trace, never to a caller's sampled or unsampled decision.
	Ratio float64
	// ServiceName is service.name; empty means "unknown_service".
	ServiceName string
	// Version is service.version, InstanceID service.instance.id (the replica); empty omits them.
	Version, InstanceID string
	// Attributes are more resource attributes (OTEL_RESOURCE_ATTRIBUTES); ServiceName,
	// Version and InstanceID win over theirs.
	Attributes map[string]string
	// BatchTimeout is the longest a span waits before it is exported; zero means the SDK's
	// (OTEL_BSP_SCHEDULE_DELAY, else 5 s).
	BatchTimeout time.Duration
	// AttributeValueLength is the longest string attribute value a span keeps, in characters
	// (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, else OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT); a
	// longer one is cut to it. Zero means DefaultAttributeValueLength: a client's headers
	// (User-Agent, the path) are attributes, and the SDK's own default keeps them whole.
	AttributeValueLength int
	// AttributeCount is the most attributes a span keeps (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, else
	// OTEL_ATTRIBUTE_COUNT_LIMIT); zero means 128.
	AttributeCount int
	// EventCount is the most events a span keeps, the latest ones (OTEL_SPAN_EVENT_COUNT_LIMIT);
	// zero means 128.
	EventCount int
}

// DefaultAttributeValueLength is Options.AttributeValueLength's default, in characters.
const DefaultAttributeValueLength = 4096

// spanLimits are the SDK's limits (with what it reads from the environment itself: those of
// links and of the attributes of events and links) with o's bounds of attribute values,
// attributes and events, which are never unlimited.
func spanLimits(o *Options) sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	l.AttributeValueLengthLimit = orDefault(o.AttributeValueLength, DefaultAttributeValueLength)
	l.AttributeCountLimit = orDefault(o.AttributeCount, sdktrace.DefaultAttributeCountLimit)
	l.EventCountLimit = orDefault(o.EventCount, sdktrace.DefaultEventCountLimit)
	return l
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Tracing is started tracing: the provider Start installed, nil when tracing is off.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// Start begins tracing as o says and installs it globally (otel.SetTracerProvider,
// otel.SetTextMapPropagator); with o.Endpoint empty it installs nothing, and the returned
// Tracing's methods do nothing.
func Start(o *Options) (*Tracing, error) {
	if o == nil || o.Endpoint == "" {
		return &Tracing{}, nil
	}
	tp, err := NewProvider(o)
	if err != nil {
		return nil, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	return &Tracing{provider: tp}, nil
}

// NewProvider returns a tracer provider exporting to o.Endpoint, installed nowhere; its
// Shutdown exports what is left.
func NewProvider(o *Options) (*sdktrace.TracerProvider, error) {
	sampler, err := newSampler(o.Sampler, o.Ratio)
	if err != nil {
		return nil, err
	}
	exp, err := newExporter(o)
	if err != nil {
		return nil, err
	}
	var batch []sdktrace.BatchSpanProcessorOption
	if o.BatchTimeout > 0 {
		batch = append(batch, sdktrace.WithBatchTimeout(o.BatchTimeout))
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, batch...),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(newResource(o)),
		sdktrace.WithRawSpanLimits(spanLimits(o)),
	), nil
}

// Propagator reads and writes W3C traceparent, tracestate and baggage.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// On reports whether tracing is on.
func (t *Tracing) On() bool { return t != nil && t.provider != nil }

// Provider is the tracer provider, nil when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if !t.On() {
		return nil
	}
	return t.provider
}

// Shutdown exports the spans not yet sent, within ctx, and stops tracing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// ErrSampler is a sampler name Start does not know.
var ErrSampler = errors.New("tracing: unknown sampler")

func newSampler(name string, ratio float64) (sdktrace.Sampler, error) {
	if ratio < 0 || ratio > 1 {
		return nil, fmt.Errorf("tracing: sampler ratio %v is not within [0, 1]", ratio)
	}
	switch name {
	case AlwaysOn:
		return sdktrace.AlwaysSample(), nil
	case AlwaysOff:
		return sdktrace.NeverSample(), nil
	case TraceIDRatio:
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "", ParentBasedAlwaysOn:
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case ParentBasedAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case ParentBasedTraceIDRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("%w %q", ErrSampler, name)
}

// newResource names the process: o's attributes, then its service name, version and instance.
func newResource(o *Options) *resource.Resource {
	attrs := make([]attribute.KeyValue, 0, len(o.Attributes)+3)
	for k, v := range o.Attributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	name := o.ServiceName
	if name == "" {
		name = o.Attributes[string(semconv.ServiceNameKey)]
	}
	if name == "" {
		name = "unknown_service"
	}
	attrs = append(attrs, semconv.ServiceName(name))
	if o.Version != "" {
		attrs = append(attrs, semconv.ServiceVersion(o.Version))
	}
	if o.InstanceID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(o.InstanceID))
	}
	// Later attributes of one key win: NewWithAttributes keeps the last.
	return resource.NewWithAttributes(semconv.SchemaURL, attrs...)
}
