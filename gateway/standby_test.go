package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/pgtest"
)

// TestStandbyLagging runs a gateway on a standby whose replay is paused while writers keep
// writing to the primary. A subscribe answers the standby's head; a from_seq the primary has
// committed but the standby has not replayed (a client coming from a replica ahead of this
// one) is no -32010 and replays nothing it already has; beyond the primary's head it is -32010.
// Once the standby replays again, each subscription gets exactly the events after its
// position, in order, the writers' concurrent events included.
func TestStandbyLagging(t *testing.T) {
	pair := pgtest.NewPair(t, nil)
	env := gatewaytest.Start(t, &gatewaytest.Options{Standby: true, StandbyPair: pair})
	env.Project(t, "WEB", "alice", "viewer")
	ctx := context.Background()
	var before int64
	for i := range 10 {
		before = appendN(t, env, itemEvent("WEB", fmt.Sprintf("WEB-%d", i), "item.created", i))
	}
	if err := pair.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	// Appended on the primary only: the paused standby does not have these.
	for i := range 10 {
		if _, err := env.PGLog.Append(ctx, itemEvent("WEB", "WEB-1", "item.updated", i)); err != nil {
			t.Fatal(err)
		}
	}
	primary, err := env.PGLog.PrimaryHead(ctx)
	if err != nil {
		t.Fatal(err)
	}

	starts := map[string]int64{}
	var clients []*wsClient
	for i, c := range codecs {
		k := login(t, env, c, "alice")
		clients = append(clients, k)
		var res subResult
		k.mustCall("stream.subscribe", map[string]any{"subscription": "now", "stream": "project:WEB"}, &res)
		if res.Seq != before {
			t.Fatalf("%s: subscribe answered seq %d; the standby's head is %d (the primary's %d)", c.Name(), res.Seq, before, primary)
		}
		starts[fmt.Sprint(i, "now")] = res.Seq
		ahead := primary - 4
		// Filters that select every event the test writes: a connection follows a stream with
		// one filter once.
		k.mustCall("stream.subscribe", map[string]any{"subscription": "ahead", "stream": "project:WEB", "from_seq": ahead, "types": []string{"*"}}, &res)
		if res.Seq != ahead {
			t.Fatalf("%s: subscribe from_seq %d beyond the standby's head answered seq %d", c.Name(), ahead, res.Seq)
		}
		starts[fmt.Sprint(i, "ahead")] = ahead
		k.mustCall("stream.subscribe", map[string]any{"subscription": "behind", "stream": "project:WEB", "from_seq": before - 3, "types": []string{"item.*"}}, nil)
		starts[fmt.Sprint(i, "behind")] = before - 3
		k.wantError("stream.subscribe", map[string]any{"subscription": "reset", "stream": "project:WEB", "from_seq": primary + 1000, "types": []string{"item.updated"}}, -32010)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if _, err := env.PGLog.Append(ctx, itemEvent("WEB", "WEB-2", "item.updated", i), itemEvent("NOISE", "NOISE-1", "item.updated", i)); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	time.Sleep(300 * time.Millisecond)
	if err := pair.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	env.StandbyDB.WaitReplayed(t)
	end, err := env.PGLog.PrimaryHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := env.Store.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, 0, end, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range clients {
		want := map[string][]int64{}
		total := 0
		for _, sub := range []string{"now", "ahead", "behind"} {
			for _, e := range all {
				if e.Seq > starts[fmt.Sprint(i, sub)] {
					want[sub] = append(want[sub], e.Seq)
					total++
				}
			}
		}
		got := map[string][]int64{}
		for n := 0; n < total; n++ {
			ev, err := k.nextEvent(30 * time.Second)
			if err != nil {
				t.Fatalf("%s: after %d of %d events: %v", codecs[i].Name(), n, total, err)
			}
			got[ev.Subscription] = append(got[ev.Subscription], ev.Seq)
		}
		for sub, w := range want {
			if !slices.Equal(got[sub], w) {
				t.Fatalf("%s %s (from %d): got %v\nwant %v", codecs[i].Name(), sub, starts[fmt.Sprint(i, sub)], got[sub], w)
			}
		}
		if ev, err := k.nextEvent(100 * time.Millisecond); err == nil {
			t.Fatalf("%s: duplicate or extra event %+v", codecs[i].Name(), ev)
		}
	}
}

// TestStandbyPoolerSeam: behind a pooler in front of two standbys, one of them paused, the head
// a subscribe reads goes back and forth while a writer writes. Subscriptions with and without
// from_seq still get exactly the events after their position, in order.
func TestStandbyPoolerSeam(t *testing.T) {
	const writerLead = 300 // well inside streams.DefaultReplayLimit
	ctx := context.Background()
	pair := pgtest.NewPair(t, nil)
	second, err := pair.AddStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Standby: true, StandbyPair: pair, TailConfig: pgtest.AlternateStandbys(pair)})
	env.Project(t, "WEB", "alice", "viewer")
	for i := range 10 {
		appendN(t, env, itemEvent("WEB", fmt.Sprintf("WEB-%d", i), "item.created", i))
	}
	if err := second.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := env.Tailer.Position()
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			// The writer keeps within writerLead events of what the tailer has read, so that a
			// from_seq taken from the tailer's position stays inside the replay limit however
			// slowly a loaded machine lets the tailer go.
			for !stop.Load() && int64(i) > env.Tailer.Position()-start+writerLead {
				time.Sleep(time.Millisecond)
			}
			if _, err := env.PGLog.Append(ctx, itemEvent("WEB", "WEB-1", "item.updated", i)); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	base := env.Tailer.Position()
	for env.Tailer.Position() < base+20 {
		time.Sleep(5 * time.Millisecond)
	}
	type run struct {
		k     *wsClient
		start int64
	}
	var runs []run
	for i := range 8 {
		k := login(t, env, codecs[i%2], "alice")
		var res subResult
		if i%2 == 0 {
			k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, &res)
			runs = append(runs, run{k, res.Seq})
		} else {
			from := max(env.Tailer.Position()-int64(i*3), 0)
			k.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB", "from_seq": from}, nil)
			runs = append(runs, run{k, from})
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err := second.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	env.StandbyDB.WaitReplayed(t)
	end, err := env.PGLog.PrimaryHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := env.PGLog.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, 0, end, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		var want, got []int64
		for _, e := range all {
			if e.Seq > r.start {
				want = append(want, e.Seq)
			}
		}
		for len(got) < len(want) {
			ev, err := r.k.nextEvent(30 * time.Second)
			if err != nil {
				t.Fatalf("client %d (from %d): after %d of %d events: %v", i, r.start, len(got), len(want), err)
			}
			got = append(got, ev.Seq)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("client %d (from %d): got %v\nwant %v", i, r.start, got, want)
		}
		if ev, err := r.k.nextEvent(100 * time.Millisecond); err == nil {
			t.Fatalf("client %d: duplicate or extra event %d", i, ev.Seq)
		}
	}
}
