package gateway_test

import (
	"fmt"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/protocol"
)

// tableParams are valid params of each method whose table entry needs a permission or takes a
// subscription place; id is a fresh subscription id, session a planner session of project WEB.
var tableParams = map[string]func(id, session string) any{
	protocol.StreamSubscribe: func(id, _ string) any {
		return protocol.SubscribeParams{Subscription: id, Stream: "project:WEB"}
	},
	protocol.PresenceGet: func(string, string) any { return protocol.PresenceGetParams{Stream: "project:WEB"} },
	protocol.PlannerWatch: func(id, session string) any {
		return protocol.WatchParams{Subscription: id, Session: session}
	},
	protocol.PlannerSend: func(_, session string) any {
		return protocol.SendParams{Session: session, Text: "hello"}
	},
	protocol.PlannerCancel: func(_, session string) any { return protocol.CancelParams{Session: session} },
}

// TestTablePermissions: each method's table entry says what it needs on the project its params
// name, and that is what is enforced, whether the gateway checks it or the planner service: a
// caller with no role is told the project (or session) is not found, one whose role lacks the
// permission is forbidden (or, for tracker.read, told not found), and one with it is served.
func TestTablePermissions(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(nil)})
	env.Project(t, "WEB", "alice", "member", "vera", "viewer")
	session := createSession(t, env, env.Token(t, "alice"))
	alice := login(t, env, codec.MsgPack, "alice")
	vera := login(t, env, codec.JSON, "vera")
	nora := login(t, env, codec.MsgPack, "nora") // no role in WEB

	checked := 0
	for name, m := range gateway.MethodRequirements() {
		if m.Perm == "" {
			continue
		}
		params, ok := tableParams[name]
		if !ok {
			t.Errorf("%s needs %s: give it params in tableParams", name, m.Perm)
			continue
		}
		checked++
		id := fmt.Sprint("perm-", checked)
		if e := nora.call(name, params(id, session), nil); e == nil ||
			(e.Code != int(protocol.ErrForbidden) && e.Code != int(protocol.ErrNotFound)) {
			t.Errorf("%s by a caller with no role: %+v, want -32003 or -32004", name, e)
		}
		switch m.Perm {
		case "tracker.read":
			vera.mustCall(name, params(id, session), nil)
		case "tracker.write":
			vera.wantError(name, params(id, session), int(protocol.ErrForbidden))
			alice.mustCall(name, params(id, session), nil)
		default:
			t.Errorf("%s: no case for %s", name, m.Perm)
		}
	}
	if checked == 0 {
		t.Fatal("no method of the table needs a permission")
	}
}

// TestTableSubscriptionPlaces: exactly the methods whose table entry subscribes take one of
// the connection's places, and a call that fails gives its place back.
func TestTableSubscriptionPlaces(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(nil),
		Config: gateway.Config{MaxSubscriptions: 1}})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	subscribing := 0
	for name, m := range gateway.MethodRequirements() {
		if !m.Subscribes {
			continue
		}
		subscribing++
		params := tableParams[name]
		if params == nil {
			t.Fatalf("%s subscribes: give it params in tableParams", name)
		}
		k := login(t, env, codec.JSON, "alice")
		// A failing call (a project nobody may read, a session that does not exist) takes no place.
		bad := map[string]any{"subscription": "a", "stream": "project:NOPE", "session": "0199a1b2-7c3d-7e4f-8a5b-6c7d8e9fa0b1"}
		k.wantError(name, bad, int(protocol.ErrNotFound))
		k.mustCall(name, params("a", session), nil)
		e := k.wantError(name, params("b", session), int(protocol.ErrLimitExceeded))
		t.Logf("%s: the second place: %s", name, e.Message)
		// The methods that take no place are still served.
		for other, o := range gateway.MethodRequirements() {
			if p := tableParams[other]; p != nil && !o.Subscribes && o.Perm == "tracker.read" {
				k.mustCall(other, p("c", session), nil)
			}
		}
		k.mustCall(protocol.StreamUnsubscribe, protocol.UnsubscribeParams{Subscription: "a"}, nil)
		k.mustCall(name, params("b", session), nil)
	}
	if subscribing == 0 {
		t.Fatal("no method of the table subscribes")
	}
}
