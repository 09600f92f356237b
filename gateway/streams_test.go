package gateway_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
)

type wireEvent struct {
	Subscription string         `json:"subscription"`
	Seq          int64          `json:"seq"`
	Type         string         `json:"type"`
	EntityType   string         `json:"entity_type"`
	EntityID     string         `json:"entity_id"`
	EntityKey    *string        `json:"entity_key"`
	OccurredAt   int64          `json:"occurred_at"`
	Actor        map[string]any `json:"actor"`
	Payload      map[string]any `json:"payload"`
}

type subResult struct {
	Subscription string `json:"subscription"`
	Seq          int64  `json:"seq"`
}

func itemEvent(project, key, typ string, n int) streams.NewEvent {
	return streams.NewEvent{
		ProjectKey: project, Type: typ, EntityType: "item", EntityID: fmt.Sprintf("0199-%s", key),
		EntityKey: key, ActorKind: "human", ActorSubject: "alice",
		Payload: []byte(fmt.Sprintf(`{"n":%d,"from":"backlog","to":"ready"}`, n)),
	}
}

func appendN(t testing.TB, env *gatewaytest.Env, evs ...streams.NewEvent) int64 {
	t.Helper()
	seq, err := env.Store.Append(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// nextEvent returns the next stream.event (failing on anything else but
// responses, which are skipped).
func (k *wsClient) nextEvent(timeout time.Duration) (*wireEvent, error) {
	for {
		m, err := k.next(timeout)
		if err != nil {
			return nil, err
		}
		if m.Method == "stream.closed" {
			var p map[string]any
			_ = k.c.Unmarshal(m.Params, &p)
			return nil, fmt.Errorf("stream.closed %v", p)
		}
		if m.Method != "stream.event" {
			continue
		}
		var ev wireEvent
		if err := k.c.Unmarshal(m.Params, &ev); err != nil {
			k.t.Fatalf("event params: %v", err)
		}
		return &ev, nil
	}
}

func (k *wsClient) mustEvent() *wireEvent {
	k.t.Helper()
	ev, err := k.nextEvent(30 * time.Second)
	if err != nil {
		k.t.Fatal(err)
	}
	return ev
}

// storeKinds runs f on the memory log, on Postgres, and on Postgres read from a streaming
// standby.
func storeKinds(t *testing.T, f func(t *testing.T, env *gatewaytest.Env)) {
	for _, kind := range []struct {
		name string
		opts gatewaytest.Options
	}{{"memory", gatewaytest.Options{}}, {"postgres", gatewaytest.Options{Postgres: true}}, {"standby", gatewaytest.Options{Standby: true}}} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			f(t, gatewaytest.Start(t, &kind.opts))
		})
	}
}

func TestSubscribeLive(t *testing.T) {
	storeKinds(t, func(t *testing.T, env *gatewaytest.Env) {
		env.Project(t, "WEB", "alice", "viewer")
		appendN(t, env, itemEvent("WEB", "WEB-1", "item.created", 0)) // before: not delivered
		for _, c := range codecs {
			k := login(t, env, c, "alice")
			var res subResult
			k.mustCall("stream.subscribe", map[string]any{"subscription": "s1", "stream": "project:WEB"}, &res)
			head, _ := env.Store.Head(context.Background())
			if res.Subscription != "s1" || res.Seq != head {
				t.Fatalf("%s: subscribe result %+v, head %d", c.Name(), res, head)
			}
			want := appendN(t, env, itemEvent("WEB", "WEB-42", "item.state_changed", 7))
			ev := k.mustEvent()
			if ev.Subscription != "s1" || ev.Seq != want || ev.Type != "item.state_changed" || ev.EntityType != "item" ||
				ev.EntityID != "0199-WEB-42" || ev.EntityKey == nil || *ev.EntityKey != "WEB-42" ||
				ev.Actor["kind"] != "human" || ev.Actor["subject"] != "alice" || ev.Payload["to"] != "ready" ||
				ev.OccurredAt < time.Now().Add(-time.Minute).UnixMilli() || ev.OccurredAt > time.Now().Add(time.Second).UnixMilli() {
				t.Fatalf("%s: event %+v", c.Name(), ev)
			}
			// Integers stay integers in both codecs.
			if n, ok := ev.Payload["n"]; !ok || fmt.Sprint(n) != "7" {
				t.Fatalf("%s: payload n = %#v", c.Name(), n)
			}
			k.mustCall("stream.unsubscribe", map[string]any{"subscription": "s1"}, nil)
			appendN(t, env, itemEvent("WEB", "WEB-42", "item.updated", 8))
			k.mustCall("system.ping", nil, nil)
			if ev, err := k.nextEvent(300 * time.Millisecond); err == nil {
				t.Fatalf("%s: event after unsubscribe: %+v", c.Name(), ev)
			}
			k.wantError("stream.unsubscribe", map[string]any{"subscription": "s1"}, -32004)
		}
	})
}

func TestSubscribeErrors(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	env.Project(t, "WEB", "alice", "viewer")
	env.Project(t, "OPS")
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		for _, tc := range []struct {
			params map[string]any
			code   int
		}{
			{map[string]any{"subscription": "", "stream": "project:WEB"}, -32602},
			{map[string]any{"subscription": strings.Repeat("é", 65), "stream": "project:WEB"}, -32602},
			{map[string]any{"subscription": "a", "stream": "project:"}, -32602},
			{map[string]any{"subscription": "a", "stream": "projects:WEB"}, -32602},
			{map[string]any{"subscription": "a", "stream": "WEB"}, -32602},
			{map[string]any{"subscription": "a", "stream": "project:WEB", "from_seq": -1}, -32602},
			{map[string]any{"subscription": "a", "stream": "project:WEB", "from_seq": "x"}, -32602},
			{map[string]any{"subscription": "a", "stream": "project:NOPE"}, -32004},
			{map[string]any{"subscription": "a", "stream": "item:NOPE-1"}, -32004},
			{map[string]any{"subscription": "a", "stream": "project:OPS"}, -32003},
			{map[string]any{"subscription": "a", "stream": "item:OPS-3"}, -32003},
		} {
			k.wantError("stream.subscribe", tc.params, tc.code)
		}
		// 64 characters is fine; a duplicate id is not.
		id := strings.Repeat("é", 64)
		k.mustCall("stream.subscribe", map[string]any{"subscription": id, "stream": "project:WEB"}, nil)
		k.wantError("stream.subscribe", map[string]any{"subscription": id, "stream": "item:WEB-1"}, -32602)
	})
}

func TestItemStreamFiltering(t *testing.T) {
	storeKinds(t, func(t *testing.T, env *gatewaytest.Env) {
		env.Project(t, "WEB", "alice", "member")
		k := login(t, env, codec.MsgPack, "alice")
		k.mustCall("stream.subscribe", map[string]any{"subscription": "i", "stream": "item:WEB-2"}, nil)
		k.mustCall("stream.subscribe", map[string]any{"subscription": "p", "stream": "project:WEB"}, nil)
		other := itemEvent("WEB", "WEB-20", "item.updated", 1)
		notItem := streams.NewEvent{ProjectKey: "WEB", Type: "comment.added", EntityType: "comment", EntityID: "c1",
			EntityKey: "WEB-2", ActorKind: "human", ActorSubject: "alice"}
		mine := itemEvent("WEB", "WEB-2", "item.updated", 2)
		appendN(t, env, other, notItem, mine)
		got := map[string][]int64{}
		for len(got["p"]) < 3 || len(got["i"]) < 1 {
			ev := k.mustEvent()
			got[ev.Subscription] = append(got[ev.Subscription], ev.Seq)
		}
		if len(got["i"]) != 1 || got["i"][0] != got["p"][2] {
			t.Fatalf("item stream got %v, project stream %v", got["i"], got["p"])
		}
		if ev, err := k.nextEvent(200 * time.Millisecond); err == nil {
			t.Fatalf("extra event %+v", ev)
		}
	})
}

func TestReplayFromSeq(t *testing.T) {
	storeKinds(t, func(t *testing.T, env *gatewaytest.Env) {
		env.Project(t, "WEB", "alice", "viewer")
		var seqs []int64
		for i := 0; i < 20; i++ {
			seqs = append(seqs, appendN(t, env, itemEvent("WEB", fmt.Sprintf("WEB-%d", i), "item.created", i)))
			appendN(t, env, itemEvent("OTHER", "OTHER-1", "item.created", i))
		}
		for _, c := range codecs {
			k := login(t, env, c, "alice")
			from := seqs[9]
			var res subResult
			k.mustCall("stream.subscribe", map[string]any{"subscription": "r", "stream": "project:WEB", "from_seq": from}, &res)
			for _, want := range seqs[10:] { // includes the live events of earlier rounds
				if ev := k.mustEvent(); ev.Seq != want {
					t.Fatalf("%s: replay got %d want %d", c.Name(), ev.Seq, want)
				}
			}
			live := appendN(t, env, itemEvent("WEB", "WEB-99", "item.created", 99))
			seqs = append(seqs, live)
			if ev := k.mustEvent(); ev.Seq != live {
				t.Fatalf("%s: live got %d want %d", c.Name(), ev.Seq, live)
			}
			// from_seq = head replays nothing (r is unsubscribed first: a stream is followed once
			// per connection).
			k.mustCall("stream.unsubscribe", map[string]any{"subscription": "r"}, nil)
			k.mustCall("stream.subscribe", map[string]any{"subscription": "r2", "stream": "project:WEB", "from_seq": live}, &res)
			if res.Seq != live {
				t.Fatalf("seq %d want %d", res.Seq, live)
			}
		}
	})
}

func TestResyncRequired(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		resyncRequired(t, gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: gateway.Config{ReplayLimit: 10}}))
	})
	t.Run("standby", func(t *testing.T) {
		t.Parallel()
		resyncRequired(t, gatewaytest.Start(t, &gatewaytest.Options{Standby: true, Config: gateway.Config{ReplayLimit: 10}}))
	})
}

func resyncRequired(t *testing.T, env *gatewaytest.Env) {
	env.Project(t, "WEB", "alice", "viewer")
	first := appendN(t, env, itemEvent("WEB", "WEB-1", "item.created", 0))
	for i := 0; i < 10; i++ {
		appendN(t, env, itemEvent("WEB", "WEB-1", "item.updated", i))
	}
	head := appendN(t, env, itemEvent("OTHER", "OTHER-1", "item.updated", 0))
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		// 10 events after first: exactly the limit, fine.
		k.mustCall("stream.subscribe", map[string]any{"subscription": "ok", "stream": "project:WEB", "from_seq": first}, nil)
		k.mustCall("stream.unsubscribe", map[string]any{"subscription": "ok"}, nil) // followed once per connection
		// 11 events: too many.
		k.wantError("stream.subscribe", map[string]any{"subscription": "old", "stream": "project:WEB", "from_seq": first - 1}, -32010)
		// Beyond the head (the database was reset).
		k.wantError("stream.subscribe", map[string]any{"subscription": "future", "stream": "project:WEB", "from_seq": head + 1000}, -32010)
		// The failed ids are free again.
		k.mustCall("stream.subscribe", map[string]any{"subscription": "old", "stream": "project:WEB"}, nil)
	})
}

// TestReplayLiveSeamUnderConcurrentWrites subscribes with from_seq while
// writers keep appending, many times over, and checks that every client sees
// exactly the stream's events after from_seq, in order, with no gap or
// duplicate at the seam between replay and live delivery.
func TestReplayLiveSeamUnderConcurrentWrites(t *testing.T) {
	storeKinds(t, func(t *testing.T, env *gatewaytest.Env) {
		env.Project(t, "WEB", "alice", "viewer")
		// Writers stop at a flag, never by cancelling an append: a cancelled
		// COMMIT may still commit, after the test has read the head.
		ctx := context.Background()
		var stop atomic.Bool
		cancel := func() { stop.Store(true) }
		var wg sync.WaitGroup
		var written atomic.Int64
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					evs := []streams.NewEvent{itemEvent("WEB", fmt.Sprintf("WEB-%d", w), "item.updated", i)}
					if i%3 == 0 {
						evs = append(evs, itemEvent("NOISE", "NOISE-1", "item.updated", i))
					}
					if _, err := env.Store.Append(ctx, evs...); err != nil {
						t.Error(err)
						return
					}
					written.Add(1)
					time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
				}
			}()
		}
		for written.Load() < 50 {
			time.Sleep(5 * time.Millisecond)
		}
		type clientRun struct {
			k    *wsClient
			from int64
			got  []int64
		}
		var runs []*clientRun
		for i := 0; i < 8; i++ {
			k := login(t, env, codecs[i%2], "alice")
			head, _ := env.Store.Head(ctx)
			from := max(head-int64(rand.IntN(40)), 0)
			k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB", "from_seq": from}, nil)
			runs = append(runs, &clientRun{k: k, from: from})
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		cancel()
		wg.Wait()
		end, _ := env.Store.Head(context.Background())
		all, err := env.Store.ReadStream(context.Background(), streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, 0, end, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range runs {
			var want []int64
			for _, e := range all {
				if e.Seq > r.from {
					want = append(want, e.Seq)
				}
			}
			for len(r.got) < len(want) {
				ev, err := r.k.nextEvent(30 * time.Second)
				if err != nil {
					t.Fatalf("client %d: after %d of %d events: %v", i, len(r.got), len(want), err)
				}
				r.got = append(r.got, ev.Seq)
			}
			for j := range want {
				if r.got[j] != want[j] {
					t.Fatalf("client %d (from %d): event %d is seq %d, want %d", i, r.from, j, r.got[j], want[j])
				}
			}
			if ev, err := r.k.nextEvent(100 * time.Millisecond); err == nil {
				t.Fatalf("client %d: duplicate or extra event %d", i, ev.Seq)
			}
		}
	})
}

func TestEventFromPsqlArrivesLive(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("psql not found")
		}
		t.Skip("psql not installed")
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true})
	env.Project(t, "WEB", "alice", "viewer")
	k := login(t, env, codec.MsgPack, "alice")
	k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "item:WEB-42"}, nil)
	sql := `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
VALUES ('WEB', 'item.state_changed', 'item', '0199abc', 'WEB-42', 'human', '8751', '{"from":"backlog","to":"ready"}');`
	out, err := exec.Command(psql, env.DatabaseURL, "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	ev := k.mustEvent()
	if ev.Type != "item.state_changed" || ev.EntityID != "0199abc" || ev.Payload["from"] != "backlog" || ev.Actor["subject"] != "8751" {
		t.Fatalf("event %+v", ev)
	}
}

func TestTailerConnectionKilledMidStream(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true})
	env.Project(t, "WEB", "alice", "viewer")
	k := login(t, env, codec.MsgPack, "alice")
	k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var want []int64
	appendRetry := func(ev streams.NewEvent) int64 {
		// The pool's connections die with the rest; a failed append did not commit.
		// Retried until the pool has connected again, however long that takes.
		for deadline := time.Now().Add(30 * time.Second); ; {
			seq, err := env.Store.Append(ctx, ev)
			if err == nil {
				return seq
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for round := 0; round < 3; round++ {
		for i := 0; i < 30; i++ {
			want = append(want, appendRetry(itemEvent("WEB", "WEB-1", "item.updated", i)))
			if i == 10 {
				// Kill every other backend of this database: the listener and the pool's.
				if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i, w := range want {
		ev, err := k.nextEvent(30 * time.Second)
		if err != nil {
			t.Fatalf("after %d events: %v", i, err)
		}
		if ev.Seq != w {
			t.Fatalf("event %d: seq %d want %d", i, ev.Seq, w)
		}
	}
}

func TestRevokeClosesForbidden(t *testing.T) {
	storeKinds(t, func(t *testing.T, env *gatewaytest.Env) {
		env.Project(t, "WEB", "alice", "viewer", "bob", "viewer")
		alice := login(t, env, codec.MsgPack, "alice")
		bob := login(t, env, codec.JSON, "bob")
		alice.mustCall("stream.subscribe", map[string]any{"subscription": "p", "stream": "project:WEB"}, nil)
		alice.mustCall("stream.subscribe", map[string]any{"subscription": "i", "stream": "item:WEB-1"}, nil)
		bob.mustCall("stream.subscribe", map[string]any{"subscription": "p", "stream": "project:WEB"}, nil)
		if err := env.Store.Revoke(context.Background(), "WEB", "alice", "human", "admin"); err != nil {
			t.Fatal(err)
		}
		closed := map[string]string{}
		for len(closed) < 2 {
			m := alice.mustNext()
			if m.Method == "stream.closed" {
				var p struct {
					Subscription string `json:"subscription"`
					Reason       string `json:"reason"`
				}
				_ = alice.c.Unmarshal(m.Params, &p)
				closed[p.Subscription] = p.Reason
			}
		}
		if closed["p"] != "forbidden" || closed["i"] != "forbidden" {
			t.Fatalf("closed %v", closed)
		}
		if ev := bob.mustEvent(); ev.Type != "member.revoked" {
			t.Fatalf("bob got %+v", ev)
		}
		alice.wantError("stream.subscribe", map[string]any{"subscription": "again", "stream": "project:WEB"}, -32003)
		// The closed ids are free again, and a new grant takes effect on the next subscribe.
		if err := env.Store.Grant(context.Background(), "WEB", "alice", "viewer", "human", "admin"); err != nil {
			t.Fatal(err)
		}
		alice.mustCall("stream.subscribe", map[string]any{"subscription": "p", "stream": "project:WEB"}, nil)
	})
}

// TestItemStreamOfAnotherWriter: item:<KEY> follows an item whose events another program writes
// with plain SQL, though the gateway's tracker has never stored it, live and in a replay; only a
// stream of an unknown project is -32004.
func TestItemStreamOfAnotherWriter(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, Postgres: true})
	env.Project(t, "WEB", "alice", "viewer")
	k := login(t, env, codec.JSON, "alice")
	k.mustCall("stream.subscribe", map[string]any{"subscription": "live", "stream": "item:WEB-42"}, nil)
	k.wantError("stream.subscribe", map[string]any{"subscription": "nope", "stream": "item:NOPE-1"}, -32004)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var seq int64
	if err := conn.QueryRow(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key,
			actor_kind, actor_subject, payload)
		VALUES ('WEB', 'item.state_changed', 'item', '0199a1b2', 'WEB-42', 'service', 'importer', '{"to":"ready"}')
		RETURNING seq`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if ev := k.mustEvent(); ev.Seq != seq || ev.EntityKey == nil || *ev.EntityKey != "WEB-42" || ev.Actor["kind"] != "service" {
		t.Fatalf("live event %+v, want seq %d of WEB-42 by the service", ev, seq)
	}
	k2 := login(t, env, codec.JSON, "alice")
	k2.mustCall("stream.subscribe", map[string]any{"subscription": "replay", "stream": "item:WEB-42", "from_seq": 0}, nil)
	if ev := k2.mustEvent(); ev.Seq != seq || ev.Subscription != "replay" {
		t.Fatalf("replayed event %+v, want seq %d on replay", ev, seq)
	}
}
