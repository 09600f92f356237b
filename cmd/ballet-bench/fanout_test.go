package main

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/internal/cli"
)

// TestIdleFanout: idle connections each receive the one event another program writes during
// the hold, and a connection that misses it fails the run.
func TestIdleFanout(t *testing.T) {
	be := startBench(t, &gateway.Config{HeartbeatInterval: 500 * time.Millisecond})
	write := func(t *testing.T) func() {
		return func() {
			_, err := be.env.Pool.Exec(context.Background(), `INSERT INTO events
				(project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
				VALUES ('BENCH', 'bench.event', 'bench', 'x', 'x', 'service', 'test', '{}')`)
			if err != nil {
				t.Error(err)
			}
		}
	}
	args := func(grace string) []string {
		return []string{"--url", be.env.URL, "--token", be.token, "--json", "--mode", "idle", "--subscribers", "20",
			"--settle", "0s", "--duration", "10ms", "--fanout-events", "1", "--grace", grace}
	}
	t.Run("all", func(t *testing.T) {
		before := float64(time.Now().UnixNano()) / 1e6
		o := runBench(t, &runOptions{Held: write(t)}, args("60s"))
		o.want(t, cli.ExitOK)
		if o.num(t, "fanout_complete") != 20 || o.num(t, "fanout_missed") != 0 {
			t.Errorf("report %v", o.report)
		}
		if first, last := o.num(t, "fanout_first_unix_ms"), o.num(t, "fanout_last_unix_ms"); first < before || last < first {
			t.Errorf("first %f, last %f, the write started at %f", first, last, before)
		}
	})
	t.Run("missed", func(t *testing.T) {
		drop := func(conn int, _ int64) bool { return conn == 3 }
		o := runBench(t, &runOptions{Held: write(t), DropEvent: drop}, args("1s"))
		o.want(t, exitFailed)
		if o.num(t, "fanout_complete") != 19 || o.num(t, "fanout_missed") != 1 {
			t.Errorf("report %v", o.report)
		}
	})
}

// TestSourceAddrs: --source-addrs dials from each address in turn.
func TestSourceAddrs(t *testing.T) {
	got, err := parseSourceAddrs("127.0.0.2-127.0.0.4,127.0.1.9")
	if err != nil || len(got) != 4 || got[2] != netip.MustParseAddr("127.0.0.4") || got[3] != netip.MustParseAddr("127.0.1.9") {
		t.Fatalf("parse: %v, %v", got, err)
	}
	for _, bad := range []string{"x", "127.0.0.3-127.0.0.2", "127.0.0.1-::1", "10.0.0.0-10.0.255.255"} {
		if _, err := parseSourceAddrs(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &sourceDialer{addrs: got[:2]}
	for i, want := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.2"} {
		c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if from := s.RemoteAddr().(*net.TCPAddr).IP.String(); from != want {
			t.Errorf("connection %d from %s, want %s", i, from, want)
		}
		s.Close()
		c.Close()
	}
}
