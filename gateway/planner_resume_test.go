package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner"
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
		// A session is watched once per connection: p goes first.
		k.mustCall("stream.unsubscribe", map[string]any{"subscription": "p"}, nil)
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
		k.mustCall("stream.unsubscribe", map[string]any{"subscription": "r"}, nil)
		k.mustCall("planner.watch", map[string]any{"subscription": "u", "session": session, "turn": "unknown", "after": 0}, &res)
		if res.Resumed == nil || *res.Resumed {
			t.Fatalf("unknown turn: %+v", res)
		}
		res.Resumed, res.Turn = nil, ""
		k.mustCall("stream.unsubscribe", map[string]any{"subscription": "u"}, nil)
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

// boundScript answers with twenty text outputs, then waits to be cancelled.
const boundScript = `{"chunk": 2, "rules": [
 {"match": "", "steps": [[{"text": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"}, {"pause_ms": 20000}, {"text": "never"}]]}]}`

type watchResult struct {
	Subscription string `json:"subscription"`
	Running      bool   `json:"running"`
	Turn         string `json:"turn"`
	Resumed      *bool  `json:"resumed"`
}

// TestPlannerResumePastTheBoundOverRPC: a turn keeps 5 outputs for resuming and streams 21.
// While it runs, a client that comes back and asks to resume it (from below the bound or
// past it) is answered resumed: false and then gets the live output, with no lagging close
// at the first output after the hole. Once it has ended, resuming succeeds only from where
// nothing is missing.
func TestPlannerResumePastTheBoundOverRPC(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(boundScript))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Planner: provider.NewScripted(script),
		PlannerOptions: planner.Options{TurnOutputs: 5}})
	env.Project(t, "WEB", "alice", "member")
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		session := createSession(t, env, env.Token(t, "alice"))
		k := login(t, env, c, "alice")
		k.mustCall("planner.watch", map[string]any{"subscription": "p", "session": session}, nil)
		k.mustCall("planner.send", map[string]any{"session": session, "text": "go on"}, nil)
		var turn string
		for i := int64(1); i <= 21; i++ {
			o := k.nextOutput("p")
			if turn == "" {
				turn = o.Turn
			}
			if o.Turn != turn || o.Offset != i {
				t.Fatalf("output %d: %s/%d", i, o.Turn, o.Offset)
			}
		}

		// A session is watched once per connection: each resume on a connection of its own.
		backs := map[string]*wsClient{}
		for sub, after := range map[string]int64{"below": 3, "at": 5, "past": 10, "last": 21} {
			var res watchResult
			back := login(t, env, c, "alice")
			backs[sub] = back
			back.mustCall("planner.watch", map[string]any{"subscription": sub, "session": session, "turn": turn, "after": after}, &res)
			if !res.Running || res.Turn != turn || res.Resumed == nil || *res.Resumed {
				t.Fatalf("resume from %d while the turn runs: %+v, want running, resumed false", after, res)
			}
		}
		k.mustCall("planner.cancel", map[string]any{"session": session}, nil)
		if o := k.nextOutput("p"); o.Type != "done" || o.Offset != 22 {
			t.Fatalf("the watcher that stayed: %+v, want done 22", o)
		}
		// Each watch gets done, live, and no stream.closed.
		for sub, back := range backs {
			m := back.mustNext()
			if m.Method == "stream.closed" {
				t.Fatalf("stream.closed %s", m.Params)
			}
			var o output
			if err := c.Unmarshal(m.Params, &o); err != nil || m.Method != "planner.output" {
				t.Fatalf("%s %s", m.Method, m.Params)
			}
			if o.Subscription != sub || o.Type != "done" || o.Offset != 22 {
				t.Fatalf("%s got %+v, want done 22 only", sub, o)
			}
			if m, err := back.next(200 * time.Millisecond); err == nil {
				t.Fatalf("%s after done: %s %s", sub, m.Method, m.Params)
			}
		}
		back := login(t, env, c, "alice")

		// Ended: from its last text output (or its done) nothing is missing.
		for sub, want := range map[string]struct {
			after   int64
			resumed bool
		}{"e0": {0, false}, "e5": {5, false}, "e20": {20, false}, "e21": {21, true}, "e22": {22, true}} {
			var res watchResult
			back.mustCall("planner.watch", map[string]any{"subscription": sub, "session": session, "turn": turn, "after": want.after}, &res)
			if res.Running || res.Resumed == nil || *res.Resumed != want.resumed {
				t.Fatalf("resume from %d after the turn: %+v, want resumed %v", want.after, res, want.resumed)
			}
			if want.after == 21 {
				if o := back.nextOutput(sub); o.Type != "done" || o.Offset != 22 {
					t.Fatalf("resumed from 21: %+v, want done 22", o)
				}
			}
			back.mustCall("stream.unsubscribe", map[string]any{"subscription": sub}, nil)
		}
		if m, err := back.next(200 * time.Millisecond); err == nil {
			t.Fatalf("after the resumes: %s %s", m.Method, m.Params)
		}
	})
}

// nextOutput reads the next planner.output for sub, failing on anything else for it.
func (k *wsClient) nextOutput(sub string) output {
	k.t.Helper()
	for {
		m := k.mustNext()
		var o output
		if err := k.c.Unmarshal(m.Params, &o); err != nil || o.Subscription != sub {
			continue
		}
		if m.Method != "planner.output" {
			k.t.Fatalf("%s for %s: %s", m.Method, sub, m.Params)
		}
		return o
	}
}
