package gateway_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway/gatewaytest"
)

// serverReaders counts the goroutines reading an rpc connection.
func serverReaders() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("rpc.(*Conn).readLoop("))
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Idle connections hold no reader goroutine (Linux), and a parked
// connection still serves requests, receives events, and notices its peer
// going away.
func TestIdleConnectionsParkTheirReaders(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("readers park on Linux only")
	}
	env := gatewaytest.Start(t, nil)
	env.Project(t, "WEB", "alice", "viewer")
	const n = 60
	ks := make([]*wsClient, n)
	for i := range ks {
		k := login(t, env, codecs[i%2], "alice")
		k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)
		ks[i] = k
	}
	eventually(t, "the idle connections' readers park", func() bool { return serverReaders() <= 2 })

	for round := range 3 {
		appendN(t, env, itemEvent("WEB", "WEB-1", "item.updated", round))
		for i, k := range ks {
			ev, err := k.nextEvent(10 * time.Second)
			if err != nil {
				t.Fatalf("round %d, client %d: %v", round, i, err)
			}
			if fmt.Sprint(ev.Payload["n"]) != fmt.Sprint(round) {
				t.Fatalf("round %d, client %d: payload %v", round, i, ev.Payload)
			}
			k.mustCall("system.ping", nil, nil)
		}
		eventually(t, "the readers park again", func() bool { return serverReaders() <= 2 })
	}

	for _, k := range ks[:n/2] {
		_ = k.ws.CloseNow()
	}
	eventually(t, "the server notices parked peers gone", func() bool {
		return metricValue(t, env.Server, "ballet_gateway_connections") == n/2
	})
	for _, k := range ks[n/2:] {
		k.mustCall("system.ping", nil, nil)
	}
}
