package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/gateway/internal/buildinfo"
	"github.com/ballet/gateway/internal/tracing"
)

// otelVariables are the OpenTelemetry variables the gateway reads itself
// (docs/configuration.md, "OpenTelemetry"); the exporter reads the other OTEL_EXPORTER_OTLP_*
// ones (timeout, compression, certificates) from the environment as its documentation says.
var otelVariables = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
	"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT", "OTEL_SPAN_EVENT_COUNT_LIMIT",
}

// The ceilings of the span limits: a span's attributes are held until it is exported, up to
// 2,048 spans queued (docs/capacity.md).
const (
	maxAttributeValueLength = 64 << 10
	maxSpanAttributes       = 1024
	maxSpanEvents           = 1024
)

// defaultServiceName is service.name when OTEL_SERVICE_NAME does not say.
const defaultServiceName = "ballet-gateway"

// readTracing reads the OTEL_* variables: tracing is on when an endpoint is set, unless
// OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turns it off. Every bad value is an error
// naming its variable.
func readTracing(getenv func(string) string) (tracing.Options, []error) {
	var o tracing.Options
	var errs []error
	bad := func(name, value, msg string) { errs = append(errs, &configError{Var: name, Value: value, Msg: msg}) }
	off := false
	if v := getenv("OTEL_SDK_DISABLED"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("OTEL_SDK_DISABLED", v, "want true or false")
		}
		off = b
	}
	switch v := getenv("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		off = true
	default:
		bad("OTEL_TRACES_EXPORTER", v, "want otlp or none")
	}
	if v := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		if msg := checkEndpoint(v); msg != "" {
			bad("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v, msg)
		}
		o.Endpoint = v
	} else if v := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		if msg := checkEndpoint(v); msg != "" {
			bad("OTEL_EXPORTER_OTLP_ENDPOINT", v, msg)
		}
		o.Endpoint = strings.TrimSuffix(v, "/") + "/v1/traces"
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if v := getenv(name); v != "" && v != "http/protobuf" {
			bad(name, v, "only http/protobuf is supported")
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if v := getenv(name); v != "" {
			h, ok := keyValues(v)
			if !ok {
				// The value is not repeated: headers carry credentials.
				bad(name, "", "want key=value pairs separated by commas, percent-encoded")
			}
			for k, val := range h {
				if o.Headers == nil {
					o.Headers = map[string]string{}
				}
				o.Headers[k] = val
			}
		}
	}
	o.Sampler = getenv("OTEL_TRACES_SAMPLER")
	if o.Sampler != "" && !slices.Contains(tracing.Samplers, o.Sampler) {
		bad("OTEL_TRACES_SAMPLER", o.Sampler, "want one of "+strings.Join(tracing.Samplers, ", "))
	}
	o.Ratio = 1
	if v := getenv("OTEL_TRACES_SAMPLER_ARG"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			bad("OTEL_TRACES_SAMPLER_ARG", v, "want a ratio from 0 to 1")
		} else {
			o.Ratio = r
		}
	}
	o.ServiceName = getenv("OTEL_SERVICE_NAME")
	if v := getenv("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		attrs, ok := keyValues(v)
		if !ok {
			bad("OTEL_RESOURCE_ATTRIBUTES", v, "want key=value pairs separated by commas, percent-encoded")
		}
		o.Attributes = attrs
	}
	if o.ServiceName == "" && o.Attributes["service.name"] == "" {
		o.ServiceName = defaultServiceName
	}
	// As the SDK reads them: the span's own variable wins over the general one.
	limit := func(dst *int, max int, names ...string) {
		for _, name := range names {
			v := getenv(name)
			if v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > max {
				bad(name, v, "want a whole number from 1 to "+strconv.Itoa(max))
			}
			*dst = n
			return
		}
	}
	limit(&o.AttributeValueLength, maxAttributeValueLength, "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
		"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
	limit(&o.AttributeCount, maxSpanAttributes, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT")
	limit(&o.EventCount, maxSpanEvents, "OTEL_SPAN_EVENT_COUNT_LIMIT")
	if off {
		o.Endpoint = ""
	}
	return o, errs
}

// checkEndpoint says what is wrong with an OTLP endpoint URL, or "".
func checkEndpoint(v string) string {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "want an http:// or https:// URL"
	}
	return ""
}

// keyValues parses "k1=v1,k2=v2" with percent-encoded values (W3C baggage's syntax, which
// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS use).
func keyValues(s string) (map[string]string, bool) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, false
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, false
		}
		out[k] = dv
	}
	return out, true
}

// newReplicaID names this process among the replicas: its host name and a random suffix, so
// that a restarted replica is told from its predecessor (service.instance.id, the planner's
// lease owner, its row in presence_replicas and its name in connection listings).
func newReplicaID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "replica"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// startTracing starts tracing as the configuration says, installed globally, with the
// replica's id and the build's version as resource attributes; it installs nothing when off.
func startTracing(cfg *config, logger *slog.Logger) (*tracing.Tracing, error) {
	o := cfg.tracing
	o.InstanceID, o.Version = cfg.replica, buildinfo.Version(version)
	t, err := tracing.Start(&o)
	if err != nil {
		return nil, err
	}
	if t.On() {
		logger.Info("tracing", "endpoint", o.Endpoint, "sampler", samplerText(&o), "service", o.ServiceName,
			"replica", o.InstanceID)
	}
	return t, nil
}

func samplerText(o *tracing.Options) string {
	s := o.Sampler
	if s == "" {
		s = tracing.ParentBasedAlwaysOn
	}
	if strings.HasSuffix(s, tracing.TraceIDRatio) {
		s += " " + strconv.FormatFloat(o.Ratio, 'g', -1, 64)
	}
	return s
}

// stopTracing exports the spans not yet sent, for at most a few seconds.
func stopTracing(t *tracing.Tracing, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans not exported at shutdown", "err", err)
	}
}
