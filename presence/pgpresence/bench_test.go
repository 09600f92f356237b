package pgpresence_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/presence/pgpresence"
	"github.com/ballet/gateway/streams/pgtest"
)

// The figures behind the design (docs/design.md, Presence): the cost of one presence
// change shared through the table with NOTIFY, one per transaction or batched as the
// registry does once per window (Store.Flush: a transaction of four round trips); the same
// change as one statement on an unlogged and on a logged table; through NOTIFY alone (a
// delta broadcast, no table); and of reading a stream's members.
//
//	go test -run '^$' -bench . -benchtime 2s ./presence/pgpresence/

// BenchmarkChange: one op is one subject joining or leaving a stream.
func BenchmarkChange(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("unlogged+notify/batch=%d", batch), func(b *testing.B) {
			pool := pgtest.Pool(b)
			s, err := pgpresence.Open(context.Background(), pool, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			counts := make([]presence.Count, batch)
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				for j := range counts {
					counts[j] = presence.Count{Stream: fmt.Sprint("project:P", j%10), Subject: fmt.Sprint("user", j), Connections: (i / batch) % 2}
				}
				if err := s.Flush(context.Background(), counts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The same single statement on an unlogged and a logged table.
	for _, table := range []string{"unlogged", "logged"} {
		b.Run(table+"+notify/statement", func(b *testing.B) {
			pool := pgtest.Pool(b)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `CREATE `+map[string]string{"unlogged": "UNLOGGED"}[table]+` TABLE bench_members (LIKE presence_members INCLUDING ALL)`); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				var err error
				if i%2 == 0 {
					_, err = pool.Exec(ctx, `WITH w AS (INSERT INTO bench_members (replica, stream, subject, connections)
						VALUES ('r', 'project:P', 'user', 1) ON CONFLICT (stream, subject, replica) DO UPDATE SET connections = 1)
						SELECT pg_notify('bench', 'r'||chr(10)||'project:P')`)
				} else {
					_, err = pool.Exec(ctx, `WITH w AS (DELETE FROM bench_members WHERE replica = 'r' AND stream = 'project:P' AND subject = 'user')
						SELECT pg_notify('bench', 'r'||chr(10)||'project:P')`)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("notify-only/batch=1", func(b *testing.B) {
		pool := pgtest.Pool(b)
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			if _, err := pool.Exec(ctx, `SELECT pg_notify('bench', $1)`,
				fmt.Sprintf(`{"replica":"0123456789abcdef01234567","stream":"project:P","subject":"user%d","connections":%d}`, i, i%2)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRead: one op reads the members of one stream (50 subjects on three replicas).
func BenchmarkRead(b *testing.B) {
	pool := pgtest.Pool(b)
	ctx := context.Background()
	var stores []*pgpresence.Store
	for range 3 {
		s, err := pgpresence.Open(ctx, pool, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	for i := range 50 {
		c := presence.Count{Stream: "project:WEB", Subject: fmt.Sprint("user", i), Connections: 1}
		if err := stores[i%2].Flush(ctx, []presence.Count{c}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		got, err := stores[2].Read(ctx, []string{"project:WEB"}, 1000)
		if err != nil || len(got["project:WEB"]) != 50 {
			b.Fatal(len(got["project:WEB"]), err)
		}
	}
}
