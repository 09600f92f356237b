package gateway_test

import (
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
)

// What one subscription follows, another on the same connection may not: a second
// stream.subscribe of a stream with the same filter, or a second planner.watch of a session,
// is refused with -32009 naming the first (it would queue every frame twice). Another filter,
// another connection, or after stream.unsubscribe, it is accepted.
func TestSecondSubscriptionOfTheSameIsRefused(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(nil)})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		sub := func(id string, extra map[string]any) map[string]any {
			p := map[string]any{"subscription": id, "stream": "project:WEB"}
			for k, v := range extra {
				p[k] = v
			}
			return p
		}
		refused := func(method string, params map[string]any, first string) {
			t.Helper()
			e := k.wantError(method, params, -32009)
			var d struct {
				Subscription string `json:"subscription"`
			}
			if err := c.Unmarshal(e.Data, &d); err != nil || d.Subscription != first {
				t.Fatalf("%s %v: data %q (%v), want the subscription %q", method, params, e.Data, err, first)
			}
		}
		k.mustCall("stream.subscribe", sub("s1", nil), nil)
		refused("stream.subscribe", sub("s2", nil), "s1")
		refused("stream.subscribe", sub("s2", map[string]any{"presence": true}), "s1")
		k.mustCall("stream.subscribe", sub("f1", map[string]any{"types": []string{"item.*", "project.created"}}), nil)
		refused("stream.subscribe", sub("f2", map[string]any{"types": []string{"project.created", "item.*", "item.*"}}), "f1")

		k.mustCall("planner.watch", map[string]any{"subscription": "w1", "session": session}, nil)
		refused("planner.watch", map[string]any{"subscription": "w2", "session": session}, "w1")

		// Another connection may follow the same.
		other := login(t, env, c, "alice")
		other.mustCall("stream.subscribe", sub("s1", nil), nil)
		other.mustCall("planner.watch", map[string]any{"subscription": "w1", "session": session}, nil)

		// Once the first is gone, the same may be followed again.
		k.mustCall("stream.unsubscribe", map[string]any{"subscription": "s1"}, nil)
		k.mustCall("stream.subscribe", sub("s2", nil), nil)
		k.mustCall("stream.unsubscribe", map[string]any{"subscription": "w1"}, nil)
		k.mustCall("planner.watch", map[string]any{"subscription": "w2", "session": session}, nil)
	})
}
