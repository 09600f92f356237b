package gateway_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
)

// Two subscriptions of one stream on one connection, with the same filter or not, each get
// every event of theirs once, in order, as the Realtime API allows (a subscription id is
// unique on the connection, nothing more); so do two planner.watch of one session, each
// every output of the turn. A third, replaying from a seq, gets its replay and then the same.
func TestTwoSubscriptionsOfOneStream(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(nil)})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	for _, c := range codecs { // one after the other: they follow one project
		t.Run(c.Name(), func(t *testing.T) { twoOfOne(t, env, c, session) })
	}
}

func twoOfOne(t *testing.T, env *gatewaytest.Env, c codec.Codec, session string) {
	k := login(t, env, c, "alice")
	var sub struct {
		Seq int64 `json:"seq"`
	}
	k.mustCall("stream.subscribe", map[string]any{"subscription": "s1", "stream": "project:WEB"}, &sub)
	k.mustCall("stream.subscribe", map[string]any{"subscription": "s2", "stream": "project:WEB"}, nil)
	k.mustCall("stream.subscribe", map[string]any{"subscription": "f1", "stream": "project:WEB",
		"types": []string{"item.created"}}, nil)
	k.mustCall("stream.subscribe", map[string]any{"subscription": "f2", "stream": "project:WEB",
		"types": []string{"item.created", "item.*"}}, nil)
	k.mustCall("stream.subscribe", map[string]any{"subscription": "i1", "stream": "item:WEB-1"}, nil)

	var want = map[string][]int64{}
	for i := range 30 {
		typ, key := "item.updated", fmt.Sprint("WEB-", 1+i%3)
		if i%5 == 0 {
			typ = "item.created"
		}
		seq := appendN(t, env, itemEvent("WEB", key, typ, i))
		want["s1"], want["s2"], want["f2"] = append(want["s1"], seq), append(want["s2"], seq), append(want["f2"], seq)
		if typ == "item.created" {
			want["f1"] = append(want["f1"], seq)
		}
		if key == "WEB-1" {
			want["i1"] = append(want["i1"], seq)
		}
	}
	// A sixth, replaying the first ten from the seq the first was answered.
	k.mustCall("stream.subscribe", map[string]any{"subscription": "r1", "stream": "project:WEB", "from_seq": sub.Seq}, nil)
	want["r1"] = slices.Clone(want["s1"])
	got := map[string][]int64{}
	total := 0
	for _, w := range want {
		total += len(w)
	}
	for n := 0; n < total; n++ {
		ev := k.mustEvent()
		got[ev.Subscription] = append(got[ev.Subscription], ev.Seq)
	}
	for id, w := range want {
		if fmt.Sprint(got[id]) != fmt.Sprint(w) {
			t.Errorf("%s: got %v\nwant %v", id, got[id], w)
		}
	}
	if ev, err := k.nextEvent(100e6); err == nil {
		t.Fatalf("an event more: %s seq %d", ev.Subscription, ev.Seq)
	}

	k.mustCall("planner.watch", map[string]any{"subscription": "w1", "session": session}, nil)
	k.mustCall("planner.watch", map[string]any{"subscription": "w2", "session": session}, nil)
	k.mustCall("planner.send", map[string]any{"session": session, "text": "plan " + c.Name()}, nil)
	a, b := k.outputs("w1"), k.outputs("w2")
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("the watches saw %d and %d outputs", len(a), len(b))
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Text != b[i].Text || a[i].Seq != b[i].Seq {
			t.Fatalf("output %d: %+v and %+v", i, a[i], b[i])
		}
	}
	k.mustCall("stream.unsubscribe", map[string]any{"subscription": "w1"}, nil)
	k.mustCall("stream.unsubscribe", map[string]any{"subscription": "s1"}, nil)
}
