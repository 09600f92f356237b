package gateway_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// BenchmarkPlannerOutputSend measures the send path of planner output on one connection:
// watches of as many sessions, each round an output of every session published at once (as
// a notification from another replica carries them) and read by the client. It reports
// the time and the process's write syscalls per output (from /proc, where there is one).
func BenchmarkPlannerOutputSend(b *testing.B) {
	for _, watches := range []int{1, 8, 50} {
		b.Run(fmt.Sprintf("watches=%d", watches), func(b *testing.B) {
			bus, k, notes := watchedSessions(b, watches)
			writes0 := syscw()
			b.ResetTimer()
			for n := range b.N {
				for i := range notes {
					o := *notes[i].Output
					o.Offset = int64(n + 1)
					notes[i].Output = &o
				}
				if err := bus.Publish(context.Background(), notes...); err != nil {
					b.Fatal(err)
				}
				for range notes {
					if m := k.mustNext(); m.Method != "planner.output" {
						b.Fatalf("got %s", m.Method)
					}
				}
			}
			b.StopTimer()
			outputs := float64(b.N * watches)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/outputs, "ns/output")
			if w := syscw(); w >= 0 {
				b.ReportMetric(float64(w-writes0)/outputs, "writes/output")
			}
		})
	}
}

// watchedSessions starts a gateway whose planner's bus is bus, and watches n sessions on
// one connection, k, as subscriptions w0, w1, …; notes[i] is a text output of session i.
func watchedSessions(tb testing.TB, n int) (bus *planner.MemoryBus, k *wsClient, notes []planner.Note) {
	bus = planner.NewMemoryBus()
	env := gatewaytest.Start(tb, &gatewaytest.Options{Planner: provider.NewScripted(nil),
		PlannerOptions: planner.Options{Bus: bus, SessionRate: 1000}})
	env.Project(tb, "WEB", "alice", "member")
	k = login(tb, env, codec.JSON, "alice")
	caller := planner.Caller{Subject: "alice", Human: true}
	notes = make([]planner.Note, n)
	for i := range notes {
		sess, err := env.Planner.CreateSession(context.Background(), caller, "WEB", "bench")
		if err != nil {
			tb.Fatal(err)
		}
		k.mustCall("planner.watch", map[string]any{"subscription": fmt.Sprint("w", i), "session": sess.ID}, nil)
		notes[i] = planner.Note{Session: sess.ID, Output: &planner.Output{Session: sess.ID, Turn: "t1",
			Type: planner.OutputText, Text: "forty bytes of model output, more or les"}}
	}
	return bus, k, notes
}

// syscw is the write syscalls of the process so far, -1 when /proc does not tell.
func syscw() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}
