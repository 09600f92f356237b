package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/heaptest"
	"github.com/ballet/gateway/internal/otlptest"
	"github.com/ballet/gateway/internal/tracing"
)

// Requests with a 60 KB User-Agent, not authenticated, with tracing on: their spans, held
// until they are exported, keep the header cut to the attribute limit (4,096 characters),
// not whole, and so does the export; the access log does not write a path of 60 KB. Not
// parallel: it measures the process's heap.
func TestSpansBoundClientText(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	// Spans wait in the batch until the flush below: the heap holds them all.
	tp, err := tracing.NewProvider(&tracing.Options{Endpoint: rcv.Endpoint(), ServiceName: "ballet-gateway",
		Sampler: tracing.AlwaysOn, BatchTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var logs syncBuffer
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, TracerProvider: tp,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	ua := strings.Repeat("a", 60_000)
	get := func(path string) {
		req, _ := http.NewRequest(http.MethodGet, env.BaseURL+path, nil)
		req.Header.Set("User-Agent", ua)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %.40s: %d, want 401", path, res.StatusCode)
		}
	}
	get("/api/v1/projects/WEB/items") // the connection and the server's buffers, before the measure
	const n = 200                     // fewer than a batch (512): none is exported before the flush
	before := heaptest.LiveHeap()
	for range n {
		get("/api/v1/projects/WEB/items")
	}
	per := (heaptest.LiveHeap() - before) / n
	t.Logf("%d spans held: %d bytes each", n, per)
	if per > 16<<10 {
		t.Errorf("each span held holds %d bytes: the whole User-Agent (60,000)", per)
	}
	get("/api/v1/projects/" + strings.Repeat("p", 3_000) + "/items")
	forceFlush(t, tp)
	spans := rcv.Spans()
	if len(spans) < n {
		t.Fatalf("%d spans exported, want %d", len(spans), n+2)
	}
	for _, s := range spans {
		if got, _ := s.Attr("user_agent.original"); len(got) != tracing.DefaultAttributeValueLength {
			t.Fatalf("user_agent.original of %d characters, want %d", len(got), tracing.DefaultAttributeValueLength)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 2<<10 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
	}
}
