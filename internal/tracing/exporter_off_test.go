//go:build nootlp

package tracing

import (
	"errors"
	"testing"
)

// A build without the exporter refuses an endpoint at start-up rather than tracing nowhere.
func TestNoExporterRefusesAnEndpoint(t *testing.T) {
	if _, err := Start(&Options{Endpoint: "http://127.0.0.1:4318/v1/traces"}); !errors.Is(err, ErrNoExporter) {
		t.Fatalf("Start with an endpoint = %v, want ErrNoExporter", err)
	}
	tr, err := Start(&Options{})
	if err != nil || tr.On() {
		t.Fatalf("Start without an endpoint = %v, %v; want tracing off, no error", tr, err)
	}
}
