package gateway_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// TestSocketStatesAreCounted: ballet_gateway_sockets counts each socket in the one state it is
// in (new, idle, session), follows it from one to the next, and is back at zero in every state
// once the sockets are closed, never below.
func TestSocketStatesAreCounted(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
		AuthTimeout: time.Minute, DrainWindow: 10 * time.Millisecond,
	}})
	states := func() map[string]int {
		m := map[string]int{}
		for _, st := range []string{"new", "active", "idle", "session"} {
			v, ok := labeledMetric(t, env.Server, "ballet_gateway_sockets", "state", st)
			if !ok {
				t.Fatalf("ballet_gateway_sockets has no state %q", st)
			}
			m[st] = int(v)
		}
		return m
	}
	want := func(what string, w map[string]int) {
		t.Helper()
		eventually(t, what, func() bool {
			got := states()
			for _, st := range []string{"new", "active", "idle", "session"} {
				if got[st] != w[st] {
					return false
				}
			}
			return true
		})
	}
	const n = 3
	var silent, kept, upgraded []*hostile
	for range n {
		silent = append(silent, hostileDial(t, env))
	}
	want("silent sockets counted new", map[string]int{"new": n})
	for range n {
		h := hostileDial(t, env)
		if _, err := h.c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(h.br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		kept = append(kept, h)
	}
	want("kept-alive sockets counted idle", map[string]int{"new": n, "idle": n})
	for range n {
		h := hostileDial(t, env)
		if resp := h.upgrade(t, ""); resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %s", resp.Status)
		}
		upgraded = append(upgraded, h)
	}
	want("upgraded sockets counted session", map[string]int{"new": n, "idle": n, "session": n})
	for _, hs := range [][]*hostile{silent, kept, upgraded} {
		for _, h := range hs {
			_ = h.c.Close()
		}
	}
	want("closed sockets counted nowhere", map[string]int{})
}
