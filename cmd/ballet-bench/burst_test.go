package main

import (
	"os"
	"testing"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/cli"
)

// burstArgs is a small burst: 20 subscribers, 2 of them paused, one commit of
// 200 events of 2 KB; the test process is the server whose RSS and CPU are read.
func burstArgs(codec string, more ...string) []string {
	return append([]string{"--mode", "burst", "--codec", codec, "--subscribers", "20", "--paused", "2",
		"--burst-events", "200", "--event-bytes", "2048", "--grace", graceLoaded,
		"--server-pid", itoa(os.Getpid())}, more...)
}

// checkBurstAccounted checks that every subscriber got every one of the 200
// events exactly once, in order, through whatever resumptions it made.
func checkBurstAccounted(t *testing.T, o *outcome) {
	t.Helper()
	if o.num(t, "committed_events") != 200 {
		t.Fatalf("committed_events = %v", o.report["committed_events"])
	}
	for g, n := range map[string]float64{"fast": 18, "paused": 2} {
		if s, c := o.num(t, g+"_subscribers"), o.num(t, g+"_complete"); s != n || c != n {
			t.Errorf("%s: %v subscribers, %v complete, want %v", g, s, c, n)
		}
		if d := o.num(t, g+"_delivered_events"); d != 200*n {
			t.Errorf("%s_delivered_events = %v, want %v", g, d, 200*n)
		}
		for _, k := range []string{"_gaps", "_duplicates", "_out_of_order", "_resyncs"} {
			if v := o.num(t, g+k); v != 0 {
				t.Errorf("%s%s = %v", g, k, v)
			}
		}
		for _, k := range []string{"_stream_closed", "_disconnects"} {
			if _, ok := o.report[g+k].(map[string]any); !ok {
				t.Errorf("%s%s = %v, want counts by code", g, k, o.report[g+k])
			}
		}
	}
	if d, e := o.num(t, "delivered_events"), o.num(t, "expected_deliveries"); d != e || e != 4000 {
		t.Errorf("delivered %v, expected %v", d, e)
	}
	for _, k := range []string{"deliveries_per_s", "fast_last_delivery_s", "paused_caught_up_s",
		"server_rss_baseline_bytes", "server_rss_peak_bytes", "server_rss_samples", "write_s"} {
		if v := o.num(t, k); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, v)
		}
	}
	o.num(t, "server_cpu_us_per_delivery")
	o.num(t, "server_rss_peak_growth_bytes")
	if o.report["mode"] != "burst" {
		t.Errorf("mode = %v", o.report["mode"])
	}
}

func TestBurst(t *testing.T) {
	be := startBench(t, nil)
	for _, c := range []string{"msgpack", "json"} {
		t.Run(c, func(t *testing.T) {
			o := be.run(t, nil, burstArgs(c)...)
			o.want(t, cli.ExitOK)
			checkBurstAccounted(t, o)
		})
	}
}

// TestBurstResumes: the paused readers of a server whose window of recent events is 64 KiB
// fall out of it, and catch up from the log when they read again, every event once; with a
// catch-up limit of 50 events they are too far behind for that, get stream.closed lagging,
// subscribe again with from_seq and replay from there, every event once; with a replay limit
// of 50 events too, that is answered -32010, and they start again without it.
func TestBurstResumes(t *testing.T) {
	t.Run("caught up", func(t *testing.T) {
		be := startBenchWith(t, &gatewaytest.Options{RecentBytes: 64 << 10})
		o := be.run(t, nil, burstArgs("msgpack")...)
		o.want(t, cli.ExitOK)
		checkBurstAccounted(t, o)
		closed, _ := o.report["paused_stream_closed"].(map[string]any)
		if len(closed) != 0 || catchUps(t, be, "caught_up") < 1 {
			t.Errorf("paused: stream.closed %v; catch-ups %v", closed, catchUps(t, be, "caught_up"))
		}
	})
	t.Run("lagging", func(t *testing.T) {
		be := startBenchWith(t, &gatewaytest.Options{RecentBytes: 64 << 10, CatchUpLimit: 50})
		o := be.run(t, nil, burstArgs("json")...)
		o.want(t, cli.ExitOK)
		checkBurstAccounted(t, o)
		closed, _ := o.report["paused_stream_closed"].(map[string]any)
		if closed["lagging"] == nil || o.num(t, "paused_resubscribed") < 1 || catchUps(t, be, "lagging") < 1 {
			t.Errorf("paused: stream.closed %v, resubscribed %v; report %v", closed, o.report["paused_resubscribed"], o.report)
		}
	})
	t.Run("resync", func(t *testing.T) {
		be := startBenchWith(t, &gatewaytest.Options{RecentBytes: 64 << 10, CatchUpLimit: 50,
			Config: gateway.Config{ReplayLimit: 50}})
		// Events the resynced readers never get are waited for no longer than this.
		o := be.run(t, nil, burstArgs("json", "--grace", "3s")...)
		closed, _ := o.report["paused_stream_closed"].(map[string]any)
		// (A fast reader that the race detector slows may lag too.)
		if closed["lagging"] == nil || o.num(t, "paused_resubscribed") < 1 || o.num(t, "paused_resyncs") < 1 ||
			catchUps(t, be, "lagging") < 1 {
			t.Errorf("paused: stream.closed %v, resubscribed %v, resyncs %v; report %v", closed,
				o.report["paused_resubscribed"], o.report["paused_resyncs"], o.report)
		}
	})
}

// catchUps is the server's ballet_gateway_catch_ups_total of outcome.
func catchUps(t *testing.T, be *benchEnv, outcome string) float64 {
	t.Helper()
	fams, err := be.env.Server.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "ballet_gateway_catch_ups_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
