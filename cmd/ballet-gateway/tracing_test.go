package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/otlptest"
	"github.com/ballet/gateway/internal/tracing"
)

func TestReadTracing(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want tracing.Options
		errs []string // the variables named by the errors
	}{
		{env: nil, want: tracing.Options{Ratio: 1, ServiceName: "ballet-gateway"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			want: tracing.Options{Endpoint: "http://collector:4318/v1/traces", Ratio: 1, ServiceName: "ballet-gateway"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/x",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG": "0.01", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment.name=prod%20eu",
			"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x"},
			want: tracing.Options{Endpoint: "https://b/x", Sampler: "parentbased_traceidratio", Ratio: 0.01,
				Attributes: map[string]string{"service.name": "from-attrs", "deployment.environment.name": "prod eu"},
				Headers:    map[string]string{"authorization": "Bearer x"}}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true", "OTEL_SERVICE_NAME": "gw"},
			want: tracing.Options{Ratio: 1, ServiceName: "gw"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"},
			want: tracing.Options{Ratio: 1, ServiceName: "ballet-gateway"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json", "OTEL_TRACES_SAMPLER": "sometimes", "OTEL_TRACES_SAMPLER_ARG": "2",
			"OTEL_RESOURCE_ATTRIBUTES": "novalue", "OTEL_SDK_DISABLED": "maybe", "OTEL_TRACES_EXPORTER": "zipkin",
			"OTEL_EXPORTER_OTLP_HEADERS": "a=%zz", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "-1",
			"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "many", "OTEL_SPAN_EVENT_COUNT_LIMIT": "0"},
			errs: []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
				"OTEL_RESOURCE_ATTRIBUTES", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
				"OTEL_SPAN_EVENT_COUNT_LIMIT"}},
		// The span's variable wins over the general one, as in the SDK.
		{env: map[string]string{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "512", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "9",
			"OTEL_ATTRIBUTE_COUNT_LIMIT": "64", "OTEL_SPAN_EVENT_COUNT_LIMIT": "32"},
			want: tracing.Options{Ratio: 1, ServiceName: "ballet-gateway", AttributeValueLength: 512, AttributeCount: 64,
				EventCount: 32}},
	} {
		got, errs := readTracing(func(name string) string { return tc.env[name] })
		var named []string
		for _, err := range errs {
			named = append(named, err.(*configError).Var)
			if strings.Contains(err.Error(), "Bearer") || strings.Contains(err.Error(), "%zz") {
				t.Errorf("an error repeats a header: %v", err)
			}
		}
		if strings.Join(named, " ") != strings.Join(tc.errs, " ") {
			t.Errorf("%v: errors name %v, want %v (%v)", tc.env, named, tc.errs, errs)
		}
		if tc.errs == nil && !equalOptions(got, tc.want) {
			t.Errorf("%v: %+v, want %+v", tc.env, got, tc.want)
		}
	}
}

func equalOptions(a, b tracing.Options) bool {
	eq := func(x, y map[string]string) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if y[k] != v {
				return false
			}
		}
		return true
	}
	return a.Endpoint == b.Endpoint && a.Sampler == b.Sampler && a.Ratio == b.Ratio && a.ServiceName == b.ServiceName &&
		a.AttributeValueLength == b.AttributeValueLength && a.AttributeCount == b.AttributeCount &&
		a.EventCount == b.EventCount && eq(a.Attributes, b.Attributes) && eq(a.Headers, b.Headers)
}

// Off, tracing installs nothing: the global provider and propagator stay OpenTelemetry's
// no-op defaults, and the server gets no provider. On, it installs the SDK's.
func TestTracingOffInstallsNothing(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })
	cfg, err := loadConfig(func(string) string { return "" }, devAddr)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := startTracing(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if tr.On() || tr.Provider() != nil {
		t.Fatal("tracing is on without an endpoint")
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Fatal("a tracer provider was installed")
	}
	if fields := otel.GetTextMapPropagator().Fields(); len(fields) != 0 {
		t.Fatalf("a propagator was installed: %v", fields)
	}

	rcv := otlptest.NewReceiver(t)
	cfg, err = loadConfig(func(name string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.Endpoint()}[name]
	}, devAddr)
	if err != nil {
		t.Fatal(err)
	}
	if tr, err = startTracing(cfg, quiet); err != nil {
		t.Fatal(err)
	}
	defer stopTracing(tr, quiet)
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); !ok || !tr.On() {
		t.Fatal("with an endpoint, no SDK tracer provider is installed")
	}
	if fields := strings.Join(slices.Sorted(slices.Values(otel.GetTextMapPropagator().Fields())), " "); fields != "baggage traceparent tracestate" {
		t.Fatalf("propagator fields %q", fields)
	}
}

// dev with an OTLP endpoint: a REST request and a stream.subscribe with a sampled parent are
// spans of that trace, named by the replica and the version; what is left is exported at
// shutdown. Switched off, it sends nothing; a bad OTEL_* value stops it naming the variable.
func TestDevTraces(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	env := []string{"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0", "BALLET_DRAIN_WINDOW=1s",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.BaseURL(), "OTEL_TRACES_SAMPLER=parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG=0", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test"}
	p := start(t, env, "dev")
	url, token := p.waitLine(t, wsURLRe), p.waitLine(t, tokenRe)
	base := strings.Replace(strings.TrimSuffix(url, "/rpc"), "ws://", "http://", 1)
	const tid, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/projects/DEMO", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("traceparent", "00-"+tid+"-"+parent+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ws := wsDial(t, url, codec.JSON)
	rpcCall(t, ws, 1, "auth", map[string]string{"token": token})
	rpcCall(t, ws, 2, "stream.subscribe", map[string]any{"subscription": "s", "stream": "project:DEMO", "from_seq": 0,
		"_meta": map[string]string{"traceparent": "00-" + tid + "-" + parent + "-01"}})
	// Ratio 0 where the gateway is the root: the upgrade and auth, with no traceparent, are not kept.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	// Exported at shutdown: the batch's own timer (5 s) has not run out by then.
	spans := rcv.Spans()
	names := map[string]otlptest.Span{}
	for _, s := range spans {
		if s.TraceID() != tid {
			t.Errorf("span %s of trace %s: only the caller's trace is sampled", s.Name, s.TraceID())
		}
		names[s.Name] = s
	}
	for _, name := range []string{"GET /api/v1/projects/{project}", "stream.subscribe"} {
		s, ok := names[name]
		if !ok {
			t.Fatalf("no span %s; received %d spans %v", name, len(spans), names)
		}
		if s.ParentID() != parent {
			t.Errorf("%s: parent %s", name, s.ParentID())
		}
		if s.Resource["service.name"] != "ballet-gateway" || s.Resource["deployment.environment.name"] != "test" ||
			!regexp.MustCompile(`-[0-9a-f]{6}$`).MatchString(s.Resource["service.instance.id"]) || s.Resource["service.version"] == "" {
			t.Errorf("%s: resource %v", name, s.Resource)
		}
	}

	// Off: an endpoint with OTEL_SDK_DISABLED=true sends nothing.
	off := otlptest.NewReceiver(t)
	p = start(t, []string{"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0", "BALLET_DRAIN_WINDOW=1s",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + off.BaseURL(), "OTEL_SDK_DISABLED=true"}, "dev")
	url, token = p.waitLine(t, wsURLRe), p.waitLine(t, tokenRe)
	ws = wsDial(t, url, codec.JSON)
	rpcCall(t, ws, 1, "auth", map[string]string{"token": token})
	rpcCall(t, ws, 2, "system.ping", map[string]any{"_meta": map[string]string{"traceparent": "00-" + tid + "-" + parent + "-01"}})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	if n := off.Requests(); n != 0 {
		t.Fatalf("tracing switched off sent %d exports", n)
	}

	p = start(t, []string{"OTEL_TRACES_SAMPLER=sometimes", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, "dev")
	if code := p.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("exit %d with bad OTEL_* values", code)
	}
	for _, w := range []string{`OTEL_TRACES_SAMPLER="sometimes"`, `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": only http/protobuf`} {
		if !strings.Contains(p.output(), w) {
			t.Errorf("output lacks %q:\n%s", w, p.output())
		}
	}
}

// docs/configuration.md's OpenTelemetry table names exactly the OTEL_* variables read.
func TestOTELVariablesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n## OpenTelemetry\n")
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
				if strings.HasPrefix(m[1], "OTEL_") {
					documented[m[1]] = true
				}
			}
		}
	}
	for _, name := range otelVariables {
		if !documented[name] {
			t.Errorf("%s is not in docs/configuration.md's OpenTelemetry table", name)
		}
		delete(documented, name)
	}
	for name := range documented {
		t.Errorf("docs/configuration.md documents %s, which the configuration does not read", name)
	}
}
