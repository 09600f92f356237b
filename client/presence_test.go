package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway"
)

// Presence through the client: each subscription follows who is on its stream, across
// a dropped connection (the new subscription's snapshot replaces the list), and
// PresenceGet answers the members with their connections.
func TestPresenceFollowsTheStream(t *testing.T) {
	t.Parallel()
	for _, cd := range codecs {
		t.Run(codecName(cd), func(t *testing.T) {
			env := startEnv(t, true, gateway.Config{})
			p := startProxy(t, env.HTTP.Listener.Addr().String())
			var st states
			alice := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token, Codec: cd, OnStateChange: st.record})
			bob := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "bob"}).Token, Codec: cd})
			ctx := context.Background()
			as, err := alice.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Presence: true})
			if err != nil {
				t.Fatal(err)
			}
			present := func(s *client.Subscription, want ...string) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for !slices.Equal(s.Present(), want) {
					select {
					case <-s.PresenceChanged():
					case <-deadline:
						t.Fatalf("present %v, want %v", s.Present(), want)
					}
				}
			}
			present(as, "alice")
			bs, err := bob.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Presence: true})
			if err != nil {
				t.Fatal(err)
			}
			present(as, "alice", "bob")
			present(bs, "alice", "bob")
			m, err := bob.PresenceGet(ctx, "project:WEB")
			if err != nil || len(m.Members) != 2 || m.Members[0].Subject != "alice" || m.Members[1].Connections != 1 {
				t.Fatalf("presence.get: %+v %v", m, err)
			}
			// Bob leaves while alice's connection is down: the snapshot after her
			// reconnect no longer has him.
			p.Stop()
			if err := bs.Unsubscribe(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			p.Start()
			waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) >= 2 })
			present(as, "alice")
			if got := bs.Present(); got != nil {
				t.Fatalf("an ended subscription still reports %v", got)
			}
			// A subscription without presence follows nothing.
			plain, err := bob.Subscribe(ctx, "project:WEB", nil)
			if err != nil {
				t.Fatal(err)
			}
			if plain.Present() != nil || plain.PresenceChanged() != nil {
				t.Fatal("a plain subscription follows presence")
			}
		})
	}
}

// Item presence through the client: a board follows who has which item open, across a
// dropped connection, and PresenceGetItems answers the same.
func TestItemPresenceFollowsTheItems(t *testing.T) {
	t.Parallel()
	for _, cd := range codecs {
		t.Run(codecName(cd), func(t *testing.T) {
			env := startEnv(t, true, gateway.Config{})
			p := startProxy(t, env.HTTP.Listener.Addr().String())
			var st states
			alice := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token, Codec: cd, OnStateChange: st.record})
			bob := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "bob"}).Token, Codec: cd})
			ctx := context.Background()
			board, err := alice.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{ItemPresence: true})
			if err != nil {
				t.Fatal(err)
			}
			items := func(want string) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for fmt.Sprint(board.ItemsPresent()) != want {
					select {
					case <-board.PresenceChanged():
					case <-deadline:
						t.Fatalf("items present %v, want %v", board.ItemsPresent(), want)
					}
				}
			}
			if board.Present() != nil {
				t.Fatal("a subscription with ItemPresence only reports the board's presence")
			}
			items("map[]")
			i1, err := bob.Subscribe(ctx, "item:WEB-1", &client.SubscribeOptions{Presence: true})
			if err != nil {
				t.Fatal(err)
			}
			i2, err := alice.Subscribe(ctx, "item:WEB-2", &client.SubscribeOptions{Presence: true})
			if err != nil {
				t.Fatal(err)
			}
			items("map[WEB-1:[bob] WEB-2:[alice]]")
			m, err := bob.PresenceGetItems(ctx, "project:WEB")
			if err != nil || fmt.Sprint(m.Items) != "[{item:WEB-1 [{bob 1}]} {item:WEB-2 [{alice 1}]}]" || len(m.Members) != 0 {
				t.Fatalf("presence.get with items: %+v %v", m, err)
			}
			// Bob closes his item while alice's connection is down: the snapshot after
			// her reconnect has only her own item.
			p.Stop()
			if err := i1.Unsubscribe(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			p.Start()
			waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) >= 2 })
			items("map[WEB-2:[alice]]")
			if err := i2.Unsubscribe(ctx); err != nil {
				t.Fatal(err)
			}
			items("map[]")
		})
	}
}
