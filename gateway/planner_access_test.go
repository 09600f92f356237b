package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// streamingScript streams one character every 5 ms for about ten seconds, so that
// output flows while access changes.
var streamingScript = `{"chunk": 1, "chunk_pause_ms": 5, "rules": [
 {"match": "", "steps": [[{"text": "` + strings.Repeat("x", 2000) + `"}]]}]}`

// watchClosed reads until stream.closed for sub and returns its reason.
func (k *wsClient) watchClosed(sub string) string {
	k.t.Helper()
	for {
		m := k.mustNext()
		if m.Method != "stream.closed" {
			continue
		}
		var p struct {
			Subscription string `json:"subscription"`
			Reason       string `json:"reason"`
		}
		if err := k.c.Unmarshal(m.Params, &p); err != nil {
			k.t.Fatal(err)
		}
		if p.Subscription == sub {
			return p.Reason
		}
	}
}

// outputsFor reads n planner.output notifications for sub, failing on a stream.closed.
func (k *wsClient) outputsFor(sub string, n int) {
	k.t.Helper()
	for n > 0 {
		m := k.mustNext()
		var p struct {
			Subscription string `json:"subscription"`
			Reason       string `json:"reason"`
		}
		_ = k.c.Unmarshal(m.Params, &p)
		switch {
		case p.Subscription != sub:
		case m.Method == "stream.closed":
			k.t.Fatalf("%s closed %s", sub, p.Reason)
		case m.Method == "planner.output":
			n--
		}
	}
}

// silent fails if anything for sub arrives within d.
func (k *wsClient) silent(sub string, d time.Duration) {
	k.t.Helper()
	deadline := time.Now().Add(d)
	for {
		m, err := k.next(time.Until(deadline))
		if err != nil {
			return
		}
		var p struct {
			Subscription string `json:"subscription"`
		}
		_ = k.c.Unmarshal(m.Params, &p)
		if p.Subscription == sub {
			k.t.Fatalf("%s after its stream.closed: %s", m.Method, m.Params)
		}
	}
}

// A watcher who loses tracker.read on the project gets stream.closed forbidden, and no
// planner.output after it, while the others' watches go on; a deleted project ends every
// watch with not_found. Like a stream subscription, the id leaves the namespace.
func TestPlannerWatchEndsWithAccess(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(streamingScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: pg, Planner: provider.NewScripted(script)})
			env.Project(t, "WEB", "alice", "member", "bob", "viewer", "carol", "viewer", "dave", "viewer")
			session := createSession(t, env, env.Token(t, "alice"))
			watch := map[string]any{"subscription": "w", "session": session}
			alice := login(t, env, codec.MsgPack, "alice")
			revoked := []*wsClient{login(t, env, codec.MsgPack, "bob"), login(t, env, codec.JSON, "carol")}
			dave := login(t, env, codec.JSON, "dave")
			for _, k := range append([]*wsClient{alice, dave}, revoked...) {
				k.mustCall("planner.watch", watch, nil)
			}
			gauge := metricValue(t, env.Server, "ballet_gateway_subscriptions")
			alice.mustCall("planner.send", map[string]any{"session": session, "text": "go"}, nil)
			for _, k := range revoked {
				k.outputsFor("w", 3)
			}

			ctx := context.Background()
			for _, subject := range []string{"bob", "carol"} {
				if err := env.Store.Revoke(ctx, "WEB", subject, "human", "alice"); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range revoked {
				if reason := k.watchClosed("w"); reason != "forbidden" {
					t.Fatalf("%s: stream.closed %s, want forbidden", k.c.Name(), reason)
				}
			}
			for _, k := range revoked {
				k.silent("w", 300*time.Millisecond)
			}
			dave.outputsFor("w", 20)
			alice.outputsFor("w", 20)
			if got := metricValue(t, env.Server, "ballet_gateway_subscriptions"); got != gauge-2 {
				t.Fatalf("subscriptions gauge %v, want %v", got, gauge-2)
			}
			if got := metricValue(t, env.Server, "ballet_gateway_stream_closes_total"); got != 2 {
				t.Fatalf("stream closes %v, want 2", got)
			}
			// The id is free again; a new grant takes effect on the next watch.
			bob := revoked[0]
			bob.wantError("planner.watch", watch, -32004) // not found or not his: one answer
			if err := env.Store.Grant(ctx, "WEB", "bob", "viewer", "human", "alice"); err != nil {
				t.Fatal(err)
			}
			bob.mustCall("planner.watch", watch, nil)
			bob.outputsFor("w", 3)

			// Project deletion (recorded by another part of Core) ends everyone's watch.
			if _, err := env.Store.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "project.deleted",
				EntityType: "project", EntityID: "WEB", ActorKind: "human", ActorSubject: "root"}); err != nil {
				t.Fatal(err)
			}
			for _, k := range []*wsClient{alice, bob, dave} {
				if reason := k.watchClosed("w"); reason != "not_found" {
					t.Fatalf("stream.closed %s, want not_found", reason)
				}
			}
			for _, k := range []*wsClient{alice, bob, dave} {
				k.silent("w", 300*time.Millisecond)
			}
			if got := metricValue(t, env.Server, "ballet_gateway_subscriptions"); got != 0 {
				t.Fatalf("subscriptions gauge %v after the deletion, want 0", got)
			}
		})
	}
}

// A session of a project the caller may not read is not found, word for word as an unknown
// id, over RPC (planner.watch, planner.send) and REST: the answer tells neither that it
// exists nor in which project.
func TestPlannerSessionNotYours(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(streamingScript))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(script)})
	env.Project(t, "WEB", "alice", "member")
	env.Project(t, "OPS", "eve", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	unknown := tracker.NewID(time.Now())
	eve := login(t, env, codec.JSON, "eve")
	for _, method := range []string{"planner.watch", "planner.send"} {
		answer := func(id string) string {
			e := eve.wantError(method, map[string]any{"subscription": "w", "session": id, "text": "hi"}, -32004)
			return strings.ReplaceAll(e.Message, id, "ID")
		}
		if theirs, none := answer(session), answer(unknown); theirs != none || strings.Contains(theirs, "WEB") {
			t.Fatalf("%s of another project's session: %q; of an unknown one: %q", method, theirs, none)
		}
	}
	rest := func(id string) string {
		status, body := restRaw(t, env, "GET", "/api/v1/planner/sessions/"+id, env.Token(t, "eve"))
		if status != http.StatusNotFound {
			t.Fatalf("GET session %s: %d %s, want 404", id, status, body)
		}
		return strings.ReplaceAll(body, id, "ID")
	}
	if theirs, none := rest(session), rest(unknown); theirs != none || strings.Contains(theirs, "WEB") {
		t.Fatalf("REST: another project's session: %s; an unknown one: %s", theirs, none)
	}
}
