package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// presenceChanged is the params of presence.changed.
type presenceChanged struct {
	Subscription string `json:"subscription"`
	Stream       string `json:"stream"`
	Joined       []struct {
		Subject string `json:"subject"`
	} `json:"joined"`
	Left []struct {
		Subject string `json:"subject"`
	} `json:"left"`
}

func (p *presenceChanged) lists() (joined, left []string) {
	joined, left = []string{}, []string{}
	for _, s := range p.Joined {
		joined = append(joined, s.Subject)
	}
	for _, s := range p.Left {
		left = append(left, s.Subject)
	}
	return joined, left
}

type presenceMembers struct {
	Stream  string `json:"stream"`
	Members []struct {
		Subject     string `json:"subject"`
		Connections int    `json:"connections"`
	} `json:"members"`
	Truncated bool `json:"truncated"`
}

func (m *presenceMembers) String() string {
	s := ""
	for _, x := range m.Members {
		s += fmt.Sprintf("%s×%d ", x.Subject, x.Connections)
	}
	return s
}

// nextPresence returns the next presence.changed, skipping anything else; an error after
// timeout.
func (k *wsClient) nextPresence(timeout time.Duration) (*presenceChanged, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := k.next(time.Until(deadline))
		if err != nil {
			return nil, err
		}
		if m.Method != "presence.changed" {
			continue
		}
		var p presenceChanged
		if err := k.c.Unmarshal(m.Params, &p); err != nil {
			k.t.Fatalf("presence.changed params: %v", err)
		}
		return &p, nil
	}
}

// wantPresence expects the next presence.changed to be for sub and exactly joined and left.
func (k *wsClient) wantPresence(sub string, joined, left []string) {
	k.t.Helper()
	p, err := k.nextPresence(30 * time.Second)
	if err != nil {
		k.t.Fatalf("waiting for presence.changed joined %v left %v: %v", joined, left, err)
	}
	j, l := p.lists()
	if p.Subscription != sub || !slices.Equal(j, joined) || !slices.Equal(l, left) {
		k.t.Fatalf("presence.changed %s %s joined %v left %v; want %s joined %v left %v", p.Subscription, p.Stream, j, l, sub, joined, left)
	}
}

// quietPresence expects no presence.changed for d.
func (k *wsClient) quietPresence(d time.Duration) {
	k.t.Helper()
	p, err := k.nextPresence(d)
	if err == nil {
		j, l := p.lists()
		k.t.Fatalf("unexpected presence.changed joined %v left %v", j, l)
	}
}

// quietAfterMove expects no presence.changed for d after a subject moved from one
// connection to another, the move taking took (from before the old connection closed until
// the new subscription was answered): a subject back within a window is no change. A loaded
// machine can make the move take longer, and then the watcher may rightly hear the subject
// leave and join again: it takes what comes until nothing has for four windows instead.
func (k *wsClient) quietAfterMove(d, took, window time.Duration) {
	k.t.Helper()
	if took < window/2 {
		k.quietPresence(d)
		return
	}
	k.t.Logf("the move took %v, not well within a window of %v: not checked", took, window)
	for {
		if _, err := k.nextPresence(4 * window); err != nil {
			return
		}
	}
}

func presenceSub(id, stream string) map[string]any {
	return map[string]any{"subscription": id, "stream": stream, "presence": true}
}

func members(k *wsClient, stream string) *presenceMembers {
	k.t.Helper()
	var m presenceMembers
	k.mustCall("presence.get", map[string]any{"stream": stream}, &m)
	if m.Stream != stream || m.Members == nil {
		k.t.Fatalf("presence.get %s: %+v", stream, m)
	}
	return &m
}

const presenceWindow = 50 * time.Millisecond

func TestPresenceOnOneReplica(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{PresenceWindow: presenceWindow}})
		env.Project(t, "WEB", "alice", "viewer", "bob", "member")
		alice := login(t, env, c, "alice")
		alice.mustCall("stream.subscribe", presenceSub("a", "project:WEB"), nil)
		alice.wantPresence("a", []string{"alice"}, []string{}) // the snapshot

		bob1 := login(t, env, c, "bob")
		bob1.mustCall("stream.subscribe", presenceSub("b", "project:WEB"), nil)
		bob1.wantPresence("b", []string{"alice", "bob"}, []string{})
		alice.wantPresence("a", []string{"bob"}, []string{})
		// A second connection of bob's, and a plain subscription: no change.
		bob2 := login(t, env, c, "bob")
		bob2.mustCall("stream.subscribe", presenceSub("b2", "project:WEB"), nil)
		bob2.wantPresence("b2", []string{"alice", "bob"}, []string{})
		bob2.mustCall("stream.subscribe", map[string]any{"subscription": "plain", "stream": "item:WEB-1"}, nil)
		m := members(alice, "project:WEB")
		if m.String() != "alice×1 bob×2 " || m.Truncated {
			t.Fatalf("presence.get: %s (truncated %v)", m, m.Truncated)
		}
		if got := members(alice, "item:WEB-1"); len(got.Members) != 0 {
			t.Fatalf("presence.get item:WEB-1 with only a plain subscription: %s", got)
		}
		if v := metricValue(t, env.Server, "ballet_gateway_presence_members"); v != 2 {
			t.Fatalf("presence_members %v, want 2", v)
		}
		// bob's first connection ends: still present through the second.
		bob1.ws.CloseNow()
		alice.quietPresence(8 * presenceWindow)
		// The last one unsubscribes: bob left.
		bob2.mustCall("stream.unsubscribe", map[string]any{"subscription": "b2"}, nil)
		alice.wantPresence("a", []string{}, []string{"bob"})
		bob2.quietPresence(4 * presenceWindow) // no notice after the unsubscribe
		if got := members(bob2, "project:WEB"); got.String() != "alice×1 " {
			t.Fatalf("presence.get after bob left: %s", got)
		}
		if v := metricValue(t, env.Server, "ballet_gateway_presence_changes_total"); v < 5 {
			t.Fatalf("presence_changes_total %v", v)
		}
	})
}

func TestPresenceGetErrors(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		env := gatewaytest.Start(t, nil)
		env.Project(t, "WEB", "alice", "viewer")
		env.Project(t, "OPS", "bob", "admin")
		alice := login(t, env, c, "alice")
		alice.wantError("presence.get", map[string]any{"stream": "project:OPS"}, -32003)
		alice.wantError("presence.get", map[string]any{"stream": "item:OPS-1"}, -32003)
		alice.wantError("presence.get", map[string]any{"stream": "project:NOPE"}, -32004)
		alice.wantError("presence.get", map[string]any{"stream": "board:WEB"}, -32602)
		alice.wantError("presence.get", map[string]any{"stream": 7}, -32602)
		alice.wantError("stream.subscribe", presenceSub("x", "project:OPS"), -32003)
		alice.wantError("stream.subscribe", map[string]any{"subscription": "x", "stream": "project:WEB", "presence": "yes"}, -32602)
		// The forbidden subscription left no presence behind.
		bob := login(t, env, c, "bob")
		if got := members(bob, "project:OPS"); len(got.Members) != 0 {
			t.Fatalf("presence after a refused subscription: %s", got)
		}
	})
}

// TestPresenceCoalescing: two replicas on one database; subjects reconnect to the other
// replica, as when one drains or dies. A single quick reconnect is no change; a storm costs
// the watcher at most one notice per window.
func TestPresenceCoalescing(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		const window = 400 * time.Millisecond
		cfg := gateway.Config{PresenceWindow: window}
		a := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg})
		b := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg, Database: a.DatabaseURL, Issuer: a.Issuer})
		replicas := []*gatewaytest.Env{a, b}
		a.Project(t, "WEB", "watcher", "viewer")
		subjects := make([]string, 30)
		for i := range subjects {
			subjects[i] = fmt.Sprintf("user%02d", i)
			if err := a.Store.Grant(context.Background(), "WEB", subjects[i], "viewer", "system", "test"); err != nil {
				t.Fatal(err)
			}
		}
		w := login(t, a, c, "watcher")
		w.mustCall("stream.subscribe", presenceSub("w", "item:WEB-7"), nil)
		w.wantPresence("w", []string{"watcher"}, []string{})

		// A reconnect: the connection to A ends and one to B subscribes again at once.
		k := login(t, a, c, subjects[0])
		k.mustCall("stream.subscribe", presenceSub("p", "item:WEB-7"), nil)
		w.wantPresence("w", []string{subjects[0]}, []string{})
		moved := time.Now()
		k.ws.CloseNow()
		k = login(t, b, c, subjects[0])
		k.mustCall("stream.subscribe", presenceSub("p", "item:WEB-7"), nil)
		w.quietAfterMove(4*window, time.Since(moved), window)

		// A storm: every subject connects, drops and reconnects to the other replica.
		conns := make([]*wsClient, len(subjects))
		conns[0] = k
		start := time.Now()
		for i := 1; i < len(subjects); i++ {
			conns[i] = login(t, replicas[i%2], c, subjects[i])
			conns[i].mustCall("stream.subscribe", presenceSub("p", "item:WEB-7"), nil)
		}
		var slowest time.Duration // of the moves: see quietAfterMove
		for i, k := range conns {
			moved := time.Now()
			k.ws.CloseNow()
			conns[i] = login(t, replicas[(i+1)%2], c, subjects[i])
			conns[i].mustCall("stream.subscribe", presenceSub("p", "item:WEB-7"), nil)
			slowest = max(slowest, time.Since(moved))
		}
		elapsed := time.Since(start)
		present := map[string]bool{"watcher": true, subjects[0]: true}
		notices := 0
		apply := func(p *presenceChanged) {
			notices++
			j, l := p.lists()
			for _, s := range j {
				present[s] = true
			}
			for _, s := range l {
				delete(present, s)
			}
		}
		for len(present) < len(subjects)+1 {
			p, err := w.nextPresence(30 * time.Second)
			if err != nil {
				t.Fatalf("after %d notices, %d present: %v", notices, len(present), err)
			}
			apply(p)
		}
		if slowest < window/2 {
			w.quietPresence(4 * window)
		} else {
			// A move slower than a window may be heard as a leave and a join: those come
			// later, and count over the longer time.
			t.Logf("the slowest move took %v, not well within a window of %v", slowest, window)
			for {
				p, err := w.nextPresence(4 * window)
				if err != nil {
					break
				}
				apply(p)
				elapsed = time.Since(start)
			}
		}
		// At most one notice per window while it lasted, and the last ones.
		if limit := int(elapsed/window) + 3; notices > limit {
			t.Fatalf("%d notices for %d reconnects in %v; at most %d", notices, 2*len(subjects), elapsed, limit)
		}
		t.Logf("%d reconnects in %v: %d notices", 2*len(subjects), elapsed, notices)
		if got := members(w, "item:WEB-7"); len(got.Members) != len(subjects)+1 {
			t.Fatalf("presence.get after the storm: %s", got)
		}
	})
}

func TestPresenceRevoked(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{PresenceWindow: presenceWindow}})
		env.Project(t, "WEB", "alice", "viewer", "bob", "admin")
		bob := login(t, env, c, "bob")
		bob.mustCall("stream.subscribe", presenceSub("b", "project:WEB"), nil)
		bob.wantPresence("b", []string{"bob"}, []string{})
		alice := login(t, env, c, "alice")
		alice.mustCall("stream.subscribe", presenceSub("p", "project:WEB"), nil)
		alice.mustCall("stream.subscribe", presenceSub("i", "item:WEB-3"), nil)
		bob.wantPresence("b", []string{"alice"}, []string{})
		if err := env.Store.Revoke(context.Background(), "WEB", "alice", "human", "bob"); err != nil {
			t.Fatal(err)
		}
		bob.wantPresence("b", []string{}, []string{"alice"})
		if got := members(bob, "item:WEB-3"); len(got.Members) != 0 {
			t.Fatalf("item:WEB-3 after the revocation: %s", got)
		}
		alice.wantError("presence.get", map[string]any{"stream": "project:WEB"}, -32003)
	})
}

// TestPresenceAcrossReplicas: two gateways on one database. A subject on two connections on
// two replicas joins and leaves once; presence.get answers the same on both; a quick move
// from one replica to the other produces nothing; a revocation ends presence everywhere.
func TestPresenceAcrossReplicas(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		const window = 200 * time.Millisecond
		cfg := gateway.Config{PresenceWindow: window}
		a := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg})
		b := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg, Database: a.DatabaseURL, Issuer: a.Issuer})
		a.Project(t, "WEB", "alice", "viewer", "bob", "viewer", "carol", "admin")
		wa := login(t, a, c, "carol")
		wa.mustCall("stream.subscribe", presenceSub("w", "project:WEB"), nil)
		wa.wantPresence("w", []string{"carol"}, []string{})
		wb := login(t, b, c, "bob")
		wb.mustCall("stream.subscribe", presenceSub("w", "project:WEB"), nil)
		wb.wantPresence("w", []string{"bob", "carol"}, []string{})
		wa.wantPresence("w", []string{"bob"}, []string{})

		alice1 := login(t, a, c, "alice")
		alice1.mustCall("stream.subscribe", presenceSub("p", "project:WEB"), nil)
		alice2 := login(t, b, c, "alice")
		alice2.mustCall("stream.subscribe", presenceSub("p", "project:WEB"), nil)
		wa.wantPresence("w", []string{"alice"}, []string{})
		wb.wantPresence("w", []string{"alice"}, []string{})
		want := "alice×2 bob×1 carol×1 "
		waitSame(t, want, wa, wb)

		alice1.ws.CloseNow()
		wa.quietPresence(4 * window)
		wb.quietPresence(0)
		waitSame(t, "alice×1 bob×1 carol×1 ", wa, wb)
		// Moving from B to A at once is no change either.
		moved := time.Now()
		alice2.ws.CloseNow()
		alice3 := login(t, a, c, "alice")
		alice3.mustCall("stream.subscribe", presenceSub("p", "project:WEB"), nil)
		took := time.Since(moved)
		wa.quietAfterMove(4*window, took, window)
		wb.quietAfterMove(0, took, window)

		// Revoked on the shared log: alice leaves for the watchers on both replicas.
		if err := a.Store.Revoke(context.Background(), "WEB", "alice", "human", "carol"); err != nil {
			t.Fatal(err)
		}
		wa.wantPresence("w", []string{}, []string{"alice"})
		wb.wantPresence("w", []string{}, []string{"alice"})
		waitSame(t, "bob×1 carol×1 ", wa, wb)
	})
}

// waitSame waits until presence.get of project:WEB answers want through every client.
func waitSame(t *testing.T, want string, ks ...*wsClient) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, k := range ks {
		for {
			got := members(k, "project:WEB")
			if got.String() == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(errors.New("presence.get: " + got.String() + ", want " + want))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
