package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/cli"
)

// TestHTTPTransport: subscribers over POST /rpc receive every event once, and the checks catch
// a loss as they do on a WebSocket.
func TestHTTPTransport(t *testing.T) {
	// Heartbeats every 500 ms: the idle run holds its responses over several, unanswered.
	be := startBench(t, &gateway.Config{HeartbeatInterval: 500 * time.Millisecond})
	t.Run("live", func(t *testing.T) {
		o := be.run(t, nil, "--transport", "http", "--subscribers", "10", "--rate", "50", "--batch", "5",
			"--duration", "2s", "--grace", graceLoaded)
		o.want(t, cli.ExitOK)
		checkClean(t, o)
		committed := o.num(t, "committed_events")
		if d, e := o.num(t, "delivered_events"), o.num(t, "expected_deliveries"); committed < 5 || d != e || e != committed*10 {
			t.Errorf("delivered %v, expected %v, committed %v × 10", d, e, committed)
		}
		if o.report["transport"] != "http" || o.report["codec"] != "json" || o.num(t, "connections") != 10 {
			t.Errorf("report %v", o.report)
		}
	})
	t.Run("saturate", func(t *testing.T) {
		o := be.run(t, nil, "--transport", "http", "--mode", "saturate", "--subscribers", "10", "--batch", "50",
			"--duration", "1s", "--grace", graceLoaded)
		o.want(t, cli.ExitOK)
		checkClean(t, o)
		if o.num(t, "deliveries_per_s") <= 0 || o.num(t, "delivered_events") != o.num(t, "expected_deliveries") {
			t.Errorf("report %v", o.report)
		}
	})
	t.Run("idle", func(t *testing.T) {
		o := be.run(t, nil, "--transport", "http", "--mode", "idle", "--subscribers", "10", "--settle", "100ms",
			"--duration", "2s", "--server-pid", itoa(os.Getpid()))
		o.want(t, cli.ExitOK)
		if o.num(t, "connections") != 10 || o.num(t, "server_rss_after_bytes") <= 0 || o.num(t, "held_s") < 1 {
			t.Errorf("report %v", o.report)
		}
	})
	t.Run("gap", func(t *testing.T) {
		o := be.run(t, dropNth(3), "--transport", "http", "--subscribers", "3", "--rate", "50", "--batch", "5",
			"--duration", "1s", "--grace", graceLoaded)
		o.want(t, exitFailed)
		if g := o.num(t, "gaps"); g != 1 {
			t.Errorf("gaps = %v, want 1", g)
		}
	})
}

// TestHTTPResponseEnds: a response the server ends is a lost connection, as a WebSocket's
// close, with the close code its last line gives; one that ends after its stream.closed is not.
func TestHTTPResponseEnds(t *testing.T) {
	t.Run("signed out", func(t *testing.T) {
		be := startBench(t, nil)
		o := runBench(t, &runOptions{Held: func() { be.env.Server.CloseSubject("bench", "signed out") }},
			[]string{"--url", be.env.URL, "--token", be.token, "--json", "--transport", "http", "--mode", "idle",
				"--subscribers", "4", "--settle", "0s", "--duration", "2s"})
		o.want(t, exitFailed)
		if o.num(t, "connections_lost") != 4 {
			t.Errorf("report %v", o.report)
		}
		if !strings.Contains(o.stderr, "4001") {
			t.Errorf("stderr = %q, want the close code 4001", o.stderr)
		}
	})
	t.Run("lagging", func(t *testing.T) {
		be := startBenchWith(t, &gatewaytest.Options{RecentBytes: 64 << 10, CatchUpLimit: 20, Config: gateway.Config{ReplayLimit: 20}})
		o := be.run(t, stallFirst(time.Second), "--transport", "http", "--mode", "saturate", "--subscribers", "3",
			"--batch", "50", "--payload-bytes", "4000", "--duration", "1s")
		o.want(t, exitFailed)
		if o.num(t, "lagging_closes") == 0 || o.num(t, "missed_by_lagging") == 0 {
			t.Errorf("report %v", o.report)
		}
		checkClean(t, o)
		if _, lost := o.report["connections_lost"]; lost {
			t.Errorf("a response that ended after stream.closed counted as lost: %v", o.report)
		}
		if f, _ := o.report["failures"].([]any); len(f) != 1 || !strings.Contains(f[0].(string), "lagging") {
			t.Errorf("failures = %v", o.report["failures"])
		}
	})
	t.Run("refused", func(t *testing.T) {
		be := startBench(t, nil)
		be.token = "not-a-token"
		o := be.run(t, nil, "--transport", "http", "--mode", "idle", "--subscribers", "2", "--settle", "0s", "--duration", "10ms")
		o.want(t, exitFailed)
		if !strings.Contains(o.stderr, "401") {
			t.Errorf("stderr = %q, want the 401", o.stderr)
		}
	})
}

// TestTransportFlag: --transport http speaks JSON to the http URL of a ws one.
func TestTransportFlag(t *testing.T) {
	getenv := func(string) string { return "" }
	cfg, err := parse([]string{"--token", "x", "--mode", "idle", "--transport", "http", "--url", "ws://h:1/rpc"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.transport != transportHTTP || cfg.codec.Binary() || cfg.url != "http://h:1/rpc" {
		t.Errorf("transport %q, codec %s, url %q", cfg.transport, codecLabel(cfg.codec), cfg.url)
	}
	cfg, err = parse([]string{"--token", "x", "--db", "postgres://x", "--transport", "http", "--codec", "json",
		"--url", "wss://h/rpc"}, getenv)
	if err != nil || cfg.url != "https://h/rpc" {
		t.Fatalf("url %q, %v", cfg.url, err)
	}
	cfg, err = parse([]string{"--token", "x", "--mode", "idle"}, getenv)
	if err != nil || cfg.transport != transportWebSocket || !cfg.codec.Binary() || cfg.url != "ws://127.0.0.1:8080/rpc" {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
}
