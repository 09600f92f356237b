package gateway_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsCarryTraceAndNeverTokens: connection lines carry the connection id
// and subject and the upgrade's trace id, REST requests are logged with
// theirs, a malformed traceparent is ignored, and no token is ever logged.
func TestLogsCarryTraceAndNeverTokens(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, Logger: logger})
	env.Project(t, "WEB", "alice", "viewer")
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	h := http.Header{"Traceparent": {"00-" + trace + "-00f067aa0ba902b7-01"}}
	ws, err := dialRaw(t, env.URL, []string{codec.NameJSON}, h)
	if err != nil {
		t.Fatal(err)
	}
	k := newClient(t, ws, codec.JSON)
	tok := env.Token(t, "alice")
	k.mustCall("auth", map[string]string{"token": tok}, nil)
	k.wantError("auth.refresh", map[string]string{"token": tok + "x"}, -32001)

	for _, tp := range []string{"00-" + trace + "-00f067aa0ba902b7-01", "not-a-trace"} {
		req, _ := http.NewRequest("GET", env.BaseURL+"/api/v1/projects/WEB/items", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Traceparent", tp)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET items with traceparent %q: %v %v", tp, err, resp)
		}
		resp.Body.Close()
	}
	out := buf.String()
	if strings.Contains(out, tok[:40]) {
		t.Fatal("a token reached the logs")
	}
	var authLine, restLines string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"msg":"authenticated"`) {
			authLine = l
		}
		if strings.Contains(l, `"msg":"http request"`) {
			restLines += l + "\n"
		}
	}
	for _, want := range []string{`"subject":"alice"`, `"trace_id":"` + trace + `"`, `"conn":"`} {
		if !strings.Contains(authLine, want) {
			t.Errorf("auth line lacks %s: %s", want, authLine)
		}
	}
	if strings.Count(restLines, `"path":"/api/v1/projects/WEB/items"`) != 2 || strings.Count(restLines, `"trace_id":"`+trace+`"`) != 1 {
		t.Errorf("REST lines:\n%s", restLines)
	}
}
