package gateway_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// presenceView is who a subscription was told is on each stream, from its presence.changed.
type presenceView map[string]map[string]bool

func (v presenceView) apply(p *presenceChanged) {
	j, l := p.lists()
	if v[p.Stream] == nil {
		v[p.Stream] = map[string]bool{}
	}
	for _, s := range j {
		v[p.Stream][s] = true
	}
	for _, s := range l {
		delete(v[p.Stream], s)
	}
	if len(v[p.Stream]) == 0 {
		delete(v, p.Stream)
	}
}

// String is "stream: subject subject; …" in order.
func (v presenceView) String() string {
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(v)) {
		parts = append(parts, st+": "+strings.Join(slices.Sorted(maps.Keys(v[st])), " "))
	}
	return strings.Join(parts, "; ")
}

// waitView applies k's presence.changed for sub to v until v reads want.
func (k *wsClient) waitView(sub string, v presenceView, want string) {
	k.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for v.String() != want {
		p, err := k.nextPresence(time.Until(deadline))
		if err != nil {
			k.t.Fatalf("presence %q, want %q: %v", v, want, err)
		}
		if p.Subscription != sub {
			k.t.Fatalf("presence.changed for %s, want %s", p.Subscription, sub)
		}
		v.apply(p)
	}
}

type itemsMembers struct {
	presenceMembers
	Items []struct {
		Stream  string `json:"stream"`
		Members []struct {
			Subject     string `json:"subject"`
			Connections int    `json:"connections"`
		} `json:"members"`
	} `json:"items"`
	ItemsTruncated *bool `json:"items_truncated"`
}

func (m *itemsMembers) String() string {
	var parts []string
	for _, it := range m.Items {
		s := it.Stream + ":"
		for _, x := range it.Members {
			s += fmt.Sprintf(" %s×%d", x.Subject, x.Connections)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// waitItems waits until presence.get of project:WEB's items answers want through every client.
func waitItems(t *testing.T, want string, ks ...*wsClient) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, k := range ks {
		for {
			var m itemsMembers
			k.mustCall("presence.get", map[string]any{"stream": "project:WEB", "items": true}, &m)
			if m.ItemsTruncated == nil || *m.ItemsTruncated || m.Stream != "project:WEB" {
				t.Fatalf("presence.get with items: %+v", m)
			}
			if m.String() == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("presence.get items: %q, want %q", m.String(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestItemPresence: a project subscription with item_presence hears who has which item
// open, across two replicas, with or without being present itself; presence.get answers the
// same on both; leaving, closing and revocation end an item's presence.
func TestItemPresence(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		const window = 100 * time.Millisecond
		cfg := gateway.Config{PresenceWindow: window}
		a := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg})
		b := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: cfg, Database: a.DatabaseURL, Issuer: a.Issuer})
		a.Project(t, "WEB", "alice", "member", "bob", "viewer", "carol", "admin", "dave", "viewer")

		carol := login(t, a, c, "carol")
		carol.mustCall("stream.subscribe", map[string]any{
			"subscription": "w", "stream": "project:WEB", "presence": true, "item_presence": true}, nil)
		cv := presenceView{}
		carol.waitView("w", cv, "project:WEB: carol") // nobody has an item open: nothing more
		carol.quietPresence(3 * window)

		bob := login(t, b, c, "bob")
		bob.mustCall("stream.subscribe", presenceSub("i", "item:WEB-1"), nil)
		bob.wantPresence("i", []string{"bob"}, []string{})
		carol.waitView("w", cv, "item:WEB-1: bob; project:WEB: carol")
		alice := login(t, a, c, "alice")
		alice.mustCall("stream.subscribe", presenceSub("i1", "item:WEB-1"), nil)
		alice.mustCall("stream.subscribe", presenceSub("i2", "item:WEB-2"), nil)
		// A plain item subscription is no presence.
		alice.mustCall("stream.subscribe", map[string]any{"subscription": "i3", "stream": "item:WEB-3"}, nil)
		carol.waitView("w", cv, "item:WEB-1: alice bob; item:WEB-2: alice; project:WEB: carol")
		waitItems(t, "item:WEB-1: alice×1 bob×1; item:WEB-2: alice×1", carol, bob)
		// Counted once per (stream, subject) on this replica: carol and alice's two items.
		if v := metricValue(t, a.Server, "ballet_gateway_presence_members"); v != 3 {
			t.Fatalf("presence_members on A %v, want 3", v)
		}

		// Following items without being present: dave is not on the board, but sees them.
		dave := login(t, b, c, "dave")
		dave.mustCall("stream.subscribe", map[string]any{"subscription": "d", "stream": "project:WEB", "item_presence": true}, nil)
		dv := presenceView{}
		dave.waitView("d", dv, "item:WEB-1: alice bob; item:WEB-2: alice")
		if got := members(dave, "project:WEB"); got.String() != "carol×1 " {
			t.Fatalf("project:WEB with dave following items: %s", got)
		}

		bob.ws.CloseNow()
		carol.waitView("w", cv, "item:WEB-1: alice; item:WEB-2: alice; project:WEB: carol")
		dave.waitView("d", dv, "item:WEB-1: alice; item:WEB-2: alice")
		alice.mustCall("stream.unsubscribe", map[string]any{"subscription": "i2"}, nil)
		carol.waitView("w", cv, "item:WEB-1: alice; project:WEB: carol")
		dave.waitView("d", dv, "item:WEB-1: alice")
		waitItems(t, "item:WEB-1: alice×1", carol, dave)

		// Revoked: alice's item presence ends everywhere.
		if err := a.Store.Revoke(context.Background(), "WEB", "alice", "human", "carol"); err != nil {
			t.Fatal(err)
		}
		carol.waitView("w", cv, "project:WEB: carol")
		dave.waitView("d", dv, "")
		waitItems(t, "", carol, dave)
		carol.quietPresence(3 * window)
	})
}

func TestItemPresenceErrors(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		env := gatewaytest.Start(t, nil)
		env.Project(t, "WEB", "alice", "viewer")
		env.Project(t, "OPS", "bob", "admin")
		alice := login(t, env, c, "alice")
		alice.wantError("stream.subscribe", map[string]any{"subscription": "x", "stream": "item:WEB-1", "item_presence": true}, -32602)
		alice.wantError("stream.subscribe", map[string]any{"subscription": "x", "stream": "project:WEB", "item_presence": 1}, -32602)
		alice.wantError("stream.subscribe", map[string]any{"subscription": "x", "stream": "project:OPS", "item_presence": true}, -32003)
		alice.wantError("presence.get", map[string]any{"stream": "item:WEB-1", "items": true}, -32602)
		alice.wantError("presence.get", map[string]any{"stream": "project:OPS", "items": true}, -32003)
		// Without items, no items in the answer.
		var m itemsMembers
		alice.mustCall("presence.get", map[string]any{"stream": "project:WEB"}, &m)
		if m.Items != nil || m.ItemsTruncated != nil {
			t.Fatalf("presence.get without items: %+v", m)
		}
	})
}
