//go:build !nootlp

package tracing_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/ballet/gateway/internal/otlptest"
	"github.com/ballet/gateway/internal/tracing"
)

// A span's exported attribute values, attributes and events are bounded: by default 4,096
// characters, 128 attributes and 128 events, and as Options say.
func TestSpanLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o                     tracing.Options
		length, attrs, events int
	}{
		{o: tracing.Options{}, length: tracing.DefaultAttributeValueLength, attrs: 128, events: 128},
		{o: tracing.Options{AttributeValueLength: 100, AttributeCount: 10, EventCount: 5}, length: 100, attrs: 10, events: 5},
	} {
		rcv := otlptest.NewReceiver(t)
		o := tc.o
		o.Endpoint, o.ServiceName = rcv.Endpoint(), "test"
		tp, err := tracing.NewProvider(&o)
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer("test").Start(context.Background(), "big")
		span.SetAttributes(attribute.String("user_agent.original", strings.Repeat("é", 60_000)))
		for i := range 300 {
			span.SetAttributes(attribute.Int("n"+strconv.Itoa(i), i))
			span.AddEvent("e" + strconv.Itoa(i))
		}
		span.End()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		s := rcv.WaitFor(t, 30*time.Second, "the span", func(s otlptest.Span) bool { return s.Name == "big" })
		ua, _ := s.Attr("user_agent.original")
		if n := len([]rune(ua)); n != tc.length {
			t.Errorf("%+v: user_agent.original of %d characters, want %d", tc.o, n, tc.length)
		}
		if len(s.Attributes) != tc.attrs || int(s.DroppedAttributesCount) != 301-tc.attrs {
			t.Errorf("%+v: %d attributes (%d dropped), want %d", tc.o, len(s.Attributes), s.DroppedAttributesCount, tc.attrs)
		}
		if len(s.Events) != tc.events || s.Events[len(s.Events)-1].Name != "e299" {
			t.Errorf("%+v: %d events, want the last %d", tc.o, len(s.Events), tc.events)
		}
	}
}
