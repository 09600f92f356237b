package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
)

const plannerScript = `{"chunk": 4, "rules": [
 {"match": "plan", "steps": [
   [{"text": "Looking at the board."}, {"tool": "list_items", "input": {}}],
   [{"text": "Adding the docs item."}, {"tool": "create_item", "input": {"title": "Write docs"}}]
 ], "final": "All done."},
 {"match": "slow", "steps": [[{"text": "Thinking"}, {"pause_ms": 20000}, {"text": "never"}]]}
]}`

type output struct {
	Subscription string         `json:"subscription"`
	Session      string         `json:"session"`
	Turn         string         `json:"turn"`
	Offset       int64          `json:"offset"`
	Type         string         `json:"type"`
	Text         string         `json:"text"`
	Tool         string         `json:"tool"`
	ToolUseID    string         `json:"tool_use_id"`
	Input        map[string]any `json:"input"`
	IsError      *bool          `json:"is_error"`
	Seq          int64          `json:"seq"`
}

// outputs reads planner.output notifications for sub until done.
func (k *wsClient) outputs(sub string) []output {
	k.t.Helper()
	var outs []output
	var skipped []*codec.Message
	defer func() { k.held = append(skipped, k.held...) }()
	for {
		m := k.mustNext()
		if m.Method != "planner.output" {
			skipped = append(skipped, m)
			continue
		}
		var o output
		if err := k.c.Unmarshal(m.Params, &o); err != nil {
			k.t.Fatal(err)
		}
		if o.Subscription != sub {
			skipped = append(skipped, m)
			continue
		}
		outs = append(outs, o)
		if o.Type == "done" {
			return outs
		}
	}
}

func createSession(t *testing.T, env *gatewaytest.Env, token string) string {
	t.Helper()
	a := rest(t, env, token, "POST", "/api/v1/projects/WEB/planner/sessions", `{"title":"Sprint"}`)
	id, _ := a.body["id"].(string)
	if a.status != 201 || id == "" {
		t.Fatalf("create session: %d %s", a.status, a.raw)
	}
	return id
}

func TestPlannerOverRPC(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(plannerScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: pg, Planner: provider.NewScripted(script)})
			env.Project(t, "WEB", "alice", "member", "bob", "viewer", "robot", "member")
			session := createSession(t, env, env.Token(t, "alice"))

			alice := login(t, env, codec.MsgPack, "alice")
			bob := login(t, env, codec.JSON, "bob")
			var res struct {
				Subscription string `json:"subscription"`
				Running      bool   `json:"running"`
			}
			alice.mustCall("planner.watch", map[string]any{"subscription": "p", "session": session}, &res)
			if res.Subscription != "p" || res.Running {
				t.Fatalf("watch result %+v", res)
			}
			bob.mustCall("planner.watch", map[string]any{"subscription": "p", "session": session}, nil)
			alice.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)
			// One id namespace for streams and watches.
			alice.wantError("planner.watch", map[string]any{"subscription": "s", "session": session}, -32602)

			var sent struct {
				Seq int64 `json:"seq"`
			}
			alice.mustCall("planner.send", map[string]any{"session": session, "text": "plan the release"}, &sent)
			if sent.Seq != 1 {
				t.Fatalf("send seq %d", sent.Seq)
			}
			a, b := alice.outputs("p"), bob.outputs("p")
			if len(a) != len(b) {
				t.Fatalf("watchers saw %d and %d outputs", len(a), len(b))
			}
			var types []string
			var text strings.Builder
			for i := range a {
				a[i].Subscription, b[i].Subscription = "", ""
				aj, _ := json.Marshal(a[i])
				bj, _ := json.Marshal(b[i])
				if string(aj) != string(bj) {
					t.Fatalf("output %d differs between codecs:\n%s\n%s", i, aj, bj)
				}
				if len(types) == 0 || types[len(types)-1] != a[i].Type {
					types = append(types, a[i].Type)
				}
				if a[i].Type == "text" {
					text.WriteString(a[i].Text)
				}
			}
			got := strings.Join(types, ",")
			for _, want := range []string{"tool_call", "tool_result", "message", "done"} {
				if !strings.Contains(got, want) {
					t.Fatalf("outputs %s lack %s", got, want)
				}
			}
			if last := a[len(a)-1]; last.Type != "done" || last.Text != "end_turn" {
				t.Fatalf("last output %+v", last)
			}
			if !strings.Contains(text.String(), "Adding the docs item.") || !strings.Contains(text.String(), "All done.") {
				t.Fatalf("streamed text %q", text.String())
			}
			// The tool's change is on the project stream, by the agent acting for alice.
			for {
				ev := alice.mustEvent()
				if ev.Type == "item.created" {
					if ev.Actor["kind"] != "agent" || ev.Actor["subject"] != "alice" {
						t.Fatalf("item.created actor %v", ev.Actor)
					}
					break
				}
			}

			// Permissions and bad params.
			bob.wantError("planner.send", map[string]any{"session": session, "text": "hi"}, -32003)
			alice.wantError("planner.send", map[string]any{"session": "nope", "text": "hi"}, -32004)
			alice.wantError("planner.send", map[string]any{"session": session, "text": ""}, -32602)
			svcTok := authtest.Mint(t, env.Issuer, "robot", auth.TokenOptions{Audience: []string{gatewaytest.Audience}, ClientID: "robot"})
			robot := dial(t, env.URL, codec.JSON)
			robot.mustCall("auth", map[string]string{"token": svcTok}, nil)
			robot.wantError("planner.send", map[string]any{"session": session, "text": "hi"}, -32003)

			// One turn at a time; cancel from another connection.
			alice2 := login(t, env, codec.JSON, "alice")
			alice.mustCall("planner.send", map[string]any{"session": session, "text": "slow one"}, nil)
			alice2.wantError("planner.send", map[string]any{"session": session, "text": "another"}, -32009)
			alice.nextOutput("p") // the turn runs: cancelled in the middle
			alice2.mustCall("planner.cancel", map[string]any{"session": session}, nil)
			outs := alice.outputs("p")
			if last := outs[len(outs)-1]; last.Text != "cancelled" {
				t.Fatalf("cancelled turn ended with %+v", last)
			}
			// done is published once the session is free: the next send is accepted.
			alice2.mustCall("planner.send", map[string]any{"session": session, "text": "plan again"}, nil)
			bob.outputs("p")
			bob.outputs("p")
			bob.mustCall("stream.unsubscribe", map[string]any{"subscription": "p"}, nil)
			bob.wantError("stream.unsubscribe", map[string]any{"subscription": "p"}, -32004)
		})
	}
}
