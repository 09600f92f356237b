package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// BenchmarkCommitToClient measures the time from a plain SQL INSERT's
// commit (in its own transaction, as any Core component writes) to the
// stream.event arriving at subscribed WebSocket clients over loopback.
// It reports p50 and p99 in milliseconds.
func BenchmarkCommitToClient(b *testing.B) {
	for _, c := range codecs {
		for _, subs := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/subscribers=%d", c.Name(), subs), func(b *testing.B) {
				benchCommitToClient(b, c, subs)
			})
		}
	}
}

func benchCommitToClient(b *testing.B, c codec.Codec, subs int) {
	env := gatewaytest.Start(b, &gatewaytest.Options{Postgres: true})
	env.Project(b, "WEB", "alice", "viewer")
	clients := make([]*wsClient, subs)
	for i := range clients {
		clients[i] = login(b, env, c, "alice")
		clients[i].mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.DatabaseURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	lat := make([]time.Duration, 0, b.N*subs)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := conn.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
			VALUES ('WEB', 'item.updated', 'item', '0199', 'WEB-1', 'human', 'alice', '{"n":1}')`)
		committed := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range clients {
			if _, err := k.nextEvent(10 * time.Second); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(committed))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
