package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// WebSocket pings (wscat, other non-browser clients) are answered, also
// while events stream to the connection.
func TestWebSocketPingsAreAnswered(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	env.Project(t, "WEB", "alice", "viewer")
	k := login(t, env, codec.JSON, "alice")
	k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			appendN(t, env, itemEvent("WEB", "WEB-1", "item.updated", i))
		}
	}()
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := k.ws.Ping(ctx)
		cancel()
		if err != nil {
			t.Fatalf("ping: %v", err)
		}
	}
	<-done
	for range 200 {
		k.mustEvent()
	}
}
