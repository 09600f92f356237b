package gateway_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// BenchmarkRPCRoundTrip is one system.ping over a real WebSocket on loopback, with tracing off,
// on at a ratio of 0.01 and on at 1 (every request a span, exported to an OTLP receiver in the
// process). Besides the time per round trip it reports the process's CPU per round trip,
// client, server and exporter together (the differences between the settings are tracing's),
// and the spans exported per round trip.
func BenchmarkRPCRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name  string
		ratio float64 // < 0: tracing off
	}{{"tracing=off", -1}, {"ratio=0.01", 0.01}, {"ratio=1", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			// Not bounded by the request rates: a round trip at a time, as fast as it goes.
			o := &gatewaytest.Options{Config: gateway.Config{RequestRate: 1 << 30, SubjectRequestRate: 1 << 30}}
			var env *gatewaytest.Env
			spans := func() int { return 0 }
			if bc.ratio < 0 {
				env = gatewaytest.Start(b, o)
			} else {
				var rcv interface {
					Discard()
					Received() int
				}
				var flush func()
				env, rcv, flush = tracedEnvAt(b, o, bc.ratio)
				rcv.Discard()
				spans = func() int { flush(); return rcv.Received() }
			}
			env.Project(b, "WEB", "alice", "viewer")
			k := login(b, env, codec.MsgPack, "alice")
			params := map[string]any{}
			before := spans()
			cpu0 := cpuTime()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k.mustCall("system.ping", params, nil)
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(spans()-before)/float64(b.N), "spans/op")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
