package gateway_test

import (
	"strings"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
)

// TestPlannerResumeOverRPC: in both codecs, planner.output carries turn and offset;
// planner.watch with {turn, after} replays the rest of the turn and says resumed;
// planner.send with the same idempotency_key answers the same seq; bad values are -32602.
func TestPlannerResumeOverRPC(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(plannerScript))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(script)})
	env.Project(t, "WEB", "alice", "member")
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		session := createSession(t, env, env.Token(t, "alice"))
		k := login(t, env, c, "alice")
		k.mustCall("planner.watch", map[string]any{"subscription": "p", "session": session}, nil)
		var sent, again struct {
			Seq int64 `json:"seq"`
		}
		k.mustCall("planner.send", map[string]any{"session": session, "text": "plan the release", "idempotency_key": "k1"}, &sent)
		outs := k.outputs("p")
		turn := outs[0].Turn
		for i, o := range outs {
			if o.Turn != turn || turn == "" || o.Offset != int64(i+1) {
				t.Fatalf("output %d: turn %q offset %d", i, o.Turn, o.Offset)
			}
		}
		k.mustCall("planner.send", map[string]any{"session": session, "text": "plan the release", "idempotency_key": "k1"}, &again)
		if again.Seq != sent.Seq {
			t.Fatalf("same key: seq %d, then %d", sent.Seq, again.Seq)
		}

		var res struct {
			Subscription string `json:"subscription"`
			Running      bool   `json:"running"`
			Turn         string `json:"turn"`
			Resumed      *bool  `json:"resumed"`
		}
		k.mustCall("planner.watch", map[string]any{"subscription": "r", "session": session, "turn": turn, "after": 2}, &res)
		if res.Subscription != "r" || res.Running || res.Turn != turn || res.Resumed == nil || !*res.Resumed {
			t.Fatalf("resume result %+v", res)
		}
		rest := k.outputs("r")
		if len(rest) != len(outs)-2 || rest[0].Offset != 3 || rest[len(rest)-1].Type != "done" {
			t.Fatalf("resumed %d outputs from offset %d, want %d from 3", len(rest), rest[0].Offset, len(outs)-2)
		}
		res = struct {
			Subscription string `json:"subscription"`
			Running      bool   `json:"running"`
			Turn         string `json:"turn"`
			Resumed      *bool  `json:"resumed"`
		}{}
		k.mustCall("planner.watch", map[string]any{"subscription": "u", "session": session, "turn": "unknown", "after": 0}, &res)
		if res.Resumed == nil || *res.Resumed {
			t.Fatalf("unknown turn: %+v", res)
		}
		res.Resumed, res.Turn = nil, ""
		k.mustCall("planner.watch", map[string]any{"subscription": "plain", "session": session}, &res)
		if res.Resumed != nil || res.Turn != "" {
			t.Fatalf("a plain watch answered %+v", res)
		}
		for _, p := range []map[string]any{
			{"subscription": "x", "session": session, "after": -1},
			{"subscription": "x", "session": session, "turn": turn},
			{"subscription": "x", "session": session, "after": "0"},
		} {
			k.wantError("planner.watch", p, -32602)
		}
		for _, key := range []any{"", strings.Repeat("k", 65), 7} {
			k.wantError("planner.send", map[string]any{"session": session, "text": "hi", "idempotency_key": key}, -32602)
		}
	})
}
