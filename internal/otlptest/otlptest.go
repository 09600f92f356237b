// Package otlptest is an OTLP/HTTP trace receiver for tests: it accepts what an exporter
// posts to /v1/traces (protobuf), decodes it with the official OTLP types, and keeps the
// spans for the test to look at.
//
// Entry points: NewReceiver (closed with the test), Receiver.Endpoint for the exporter,
// Receiver.Spans, Receiver.WaitFor. Caveat: it keeps every span it receives; a test sends
// only a few.
package otlptest

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with the resource it came from.
type Span struct {
	*tracepb.Span
	Resource map[string]string // the resource's attributes, as strings
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.TraceId) }

// SpanID is the span's id in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.Span.SpanId) }

// ParentID is the parent span's id in hex, "" for a root.
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.ParentSpanId) }

// Attr is the string form of the span's attribute key, and whether it has it.
func (s Span) Attr(key string) (string, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return valueString(kv.Value), true
		}
	}
	return "", false
}

// Receiver is an OTLP/HTTP trace receiver.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	received int           // spans received, kept or not
	discard  bool          // count spans without keeping them (benchmarks)
	changed  chan struct{} // closed and replaced when spans arrive
}

// NewReceiver starts a receiver, closed when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

// Endpoint is the URL an exporter posts to (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
func (r *Receiver) Endpoint() string { return r.srv.URL + "/v1/traces" }

// BaseURL is the receiver's URL without a path (OTEL_EXPORTER_OTLP_ENDPOINT).
func (r *Receiver) BaseURL() string { return r.srv.URL }

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want an application/x-protobuf body", http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.ResourceSpans {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.Key] = valueString(kv.Value)
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				got = append(got, Span{Span: sp, Resource: res})
			}
		}
	}
	r.mu.Lock()
	r.requests++
	r.received += len(got)
	if !r.discard {
		r.spans = append(r.spans, got...)
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Discard makes the receiver count the spans it receives from now on without keeping them,
// for a benchmark's long runs.
func (r *Receiver) Discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discard = true
}

// Received is how many spans the receiver has received, kept or not.
func (r *Receiver) Received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.received
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests is how many exports the receiver has answered.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// WaitFor waits up to timeout for a received span that match accepts, and returns the
// first; it fails the test when none arrives.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, what string, match func(Span) bool) Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, s := range r.spans {
			if match(s) {
				r.mu.Unlock()
				return s
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no span %s within %s; received %s", what, timeout, summary(r.Spans()))
			return Span{}
		}
	}
}

// Named matches a span by name.
func Named(name string) func(Span) bool { return func(s Span) bool { return s.Name == name } }

func summary(spans []Span) string {
	out := "["
	for i, s := range spans {
		if i > 0 {
			out += ", "
		}
		out += s.Name + " " + s.TraceID()
	}
	return out + "]"
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return v.String()
}
