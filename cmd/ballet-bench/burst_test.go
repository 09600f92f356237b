package main

import (
	"os"
	"testing"

	"github.com/ballet/gateway/gateway"
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
			o.want(t, exitOK)
			checkBurstAccounted(t, o)
		})
	}
}

// TestBurstResumes: a server that queues 8 events per subscription closes the
// paused readers' subscriptions lagging, and one whose connections together
// may queue 64 KiB closes connections 1013; the readers subscribe again, or
// reconnect, with from_seq and still get every event once.
func TestBurstResumes(t *testing.T) {
	t.Run("lagging", func(t *testing.T) {
		be := startBench(t, &gateway.Config{SubscriberQueue: 8})
		o := be.run(t, nil, burstArgs("msgpack")...)
		o.want(t, exitOK)
		checkBurstAccounted(t, o)
		closed, _ := o.report["paused_stream_closed"].(map[string]any)
		if closed["lagging"] == nil || o.num(t, "paused_resubscribed") < 1 {
			t.Errorf("paused: stream.closed %v, resubscribed %v", closed, o.report["paused_resubscribed"])
		}
	})
	t.Run("disconnected", func(t *testing.T) {
		be := startBench(t, &gateway.Config{ReplicaQueueBytes: 64 << 10, SocketBufferBytes: 16 << 10})
		o := be.run(t, nil, burstArgs("json")...)
		o.want(t, exitOK)
		checkBurstAccounted(t, o)
		// A paused reader may find the close after the last event; the fast ones
		// are closed with the burst half delivered.
		var lost float64
		for _, g := range []string{"fast", "paused"} {
			m, _ := o.report[g+"_disconnects"].(map[string]any)
			n, _ := m["1013"].(float64)
			lost += n
		}
		if lost < 1 || o.num(t, "fast_reconnected")+o.num(t, "paused_reconnected") < 1 {
			t.Errorf("disconnects 1013: %v; fast reconnected %v, paused %v", lost,
				o.report["fast_reconnected"], o.report["paused_reconnected"])
		}
	})
}
