package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/streams"
)

// A subscription with Types gets only matching events, and keeps its filter when it
// resumes after a dropped connection.
func TestSubscribeTypesAcrossReconnect(t *testing.T) {
	for _, cd := range codecs {
		t.Run(codecName(cd), func(t *testing.T) {
			env := startEnv(t, true, gateway.Config{})
			p := startProxy(t, env.HTTP.Listener.Addr().String())
			var st states
			c := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token, Codec: cd, OnStateChange: st.record})
			sub, err := c.Subscribe(context.Background(), "project:WEB", &client.SubscribeOptions{Types: []string{"test.keep*"}})
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			add := func(n int) {
				for i := range n {
					typ := "test.keep"
					if i%2 == 1 {
						typ = "test.skip"
					}
					seq, err := env.Store.Append(context.Background(), streams.NewEvent{ProjectKey: "WEB", Type: typ,
						EntityType: "item", EntityID: fmt.Sprint("id-", i), EntityKey: "WEB-1", ActorKind: "system", ActorSubject: "test"})
					if err != nil {
						t.Fatal(err)
					}
					if typ == "test.keep" {
						want = append(want, seq)
					}
				}
			}
			next := func() client.Event {
				t.Helper()
				select {
				case ev, ok := <-sub.Events():
					if !ok {
						t.Fatalf("subscription ended: %v", sub.Err())
					}
					return ev
				case <-time.After(30 * time.Second):
					t.Fatal("no event within 30s")
					return client.Event{}
				}
			}
			add(10)
			for _, seq := range want {
				if ev := next(); ev.Seq != seq || ev.Type != "test.keep" {
					t.Fatalf("got %s %d, want test.keep %d", ev.Type, ev.Seq, seq)
				}
			}
			p.Drop()
			add(10) // while reconnecting: replayed with the filter
			waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) >= 2 })
			add(10)
			for _, seq := range want[5:] {
				if ev := next(); ev.Seq != seq || ev.Type != "test.keep" {
					t.Fatalf("after the reconnect: got %s %d, want test.keep %d", ev.Type, ev.Seq, seq)
				}
			}
		})
	}
}
