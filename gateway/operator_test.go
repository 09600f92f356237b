package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
)

// operatorClose is the bound on closing a subject's connections after an operator's action.
const operatorClose = 2 * time.Second

// restRaw sends a request with a bearer token (none when token is "") and returns the status and
// the body.
func restRaw(t *testing.T, env *gatewaytest.Env, method, path, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, env.BaseURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := env.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wantREST fails unless method path answers status.
func wantREST(t *testing.T, env *gatewaytest.Env, method, path, token string, status int) string {
	t.Helper()
	got, body := restRaw(t, env, method, path, token)
	if got != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, got, body, status)
	}
	return body
}

// closedWithin fails unless every client is closed with 4001 within operatorClose of start.
func closedWithin(t *testing.T, start time.Time, ks ...*wsClient) {
	t.Helper()
	for _, k := range ks {
		if code := k.waitClose(operatorClose); code != gateway.StatusUnauthenticated {
			t.Fatalf("%s: close %d, want 4001", k.c.Name(), code)
		}
	}
	if d := time.Since(start); d > operatorClose {
		t.Fatalf("connections closed after %v, want within %v", d, operatorClose)
	}
}

// refusedAt fails unless auth with token answers -32001 naming reason and closes with 4001.
func refusedAt(t *testing.T, env *gatewaytest.Env, c codec.Codec, token, reason string) {
	t.Helper()
	k := dial(t, env.URL, c)
	e := k.wantError("auth", map[string]string{"token": token}, -32001)
	if !strings.Contains(e.Message, reason) {
		t.Fatalf("auth refused with %q, want the reason %s", e.Message, reason)
	}
	if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
		t.Fatalf("close %d, want 4001", code)
	}
}

// accepted fails unless token authenticates on /rpc and REST.
func accepted(t *testing.T, env *gatewaytest.Env, c codec.Codec, token string) {
	t.Helper()
	k := dial(t, env.URL, c)
	var res authResult
	k.mustCall("auth", map[string]string{"token": token}, &res)
	wantREST(t, env, "GET", "/api/v1/projects", token, http.StatusOK)
	k.hangUp()
}

// nextSecond waits until the clock is past the current second, so that a token minted next
// is issued after an operator's action of this second.
func nextSecond() {
	now := time.Now()
	time.Sleep(time.Unix(now.Unix()+1, 0).Sub(now) + 10*time.Millisecond)
}

// subjectEvents returns the log's events of operators' actions, in order.
func subjectEvents(t *testing.T, env *gatewaytest.Env) []streams.Event {
	t.Helper()
	evs, err := env.Store.ReadAfter(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []streams.Event
	for _, ev := range evs {
		if _, ok := streams.SubjectChange(&ev); ok {
			out = append(out, ev)
		}
	}
	return out
}

// wantEvent fails unless ev is an action of type on subject by the human admin.
func wantEvent(t *testing.T, ev streams.Event, typ, subject, admin string) {
	t.Helper()
	var p struct{ Subject, Admin string }
	if err := json.Unmarshal(ev.Payload, &p); err != nil || ev.Type != typ || ev.ProjectKey != "" ||
		ev.EntityType != "subject" || ev.EntityID != subject || ev.ActorKind != "human" || ev.ActorSubject != admin ||
		p.Subject != subject || p.Admin != admin {
		t.Fatalf("event %d %s %s/%s by %s/%s %s, want %s of %s by %s", ev.Seq, ev.Type, ev.EntityType, ev.EntityID,
			ev.ActorKind, ev.ActorSubject, ev.Payload, typ, subject, admin)
	}
}

func forEachStore(t *testing.T, f func(t *testing.T, o *gatewaytest.Options)) {
	for _, pg := range []bool{false, true} {
		name := "memory"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, &gatewaytest.Options{Postgres: pg, Tracker: true, AdminSubjects: []string{"root"}})
		})
	}
}

// TestOperatorSignOut: a sign-out closes the subject's connections in both codecs within 2 s,
// refuses at auth and on REST the tokens issued until then, accepts those issued later, and
// is recorded in the log.
func TestOperatorSignOut(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *gatewaytest.Options) {
		env := gatewaytest.Start(t, o)
		env.Project(t, "WEB", "alice", "viewer", "bob", "viewer")
		root, old := env.Token(t, "root"), env.Token(t, "alice")
		ks := []*wsClient{login(t, env, codec.MsgPack, "alice"), login(t, env, codec.JSON, "alice")}
		bob := login(t, env, codec.JSON, "bob")

		start := time.Now()
		wantREST(t, env, "POST", "/api/v1/admin/subjects/alice/sign-out", root, http.StatusNoContent)
		closedWithin(t, start, ks...)
		bob.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)

		for _, c := range codecs {
			refusedAt(t, env, c, old, "signed_out")
		}
		if body := wantREST(t, env, "GET", "/api/v1/projects", old, http.StatusUnauthorized); !strings.Contains(body, "signed_out") {
			t.Fatalf("REST refusal %s", body)
		}
		nextSecond()
		for _, c := range codecs {
			accepted(t, env, c, env.Token(t, "alice"))
		}
		k := dial(t, env.URL, codec.JSON)
		k.mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, nil)
		if e := k.wantError("auth.refresh", map[string]string{"token": old}, -32001); !strings.Contains(e.Message, "signed_out") {
			t.Fatalf("auth.refresh with a token issued before the sign-out: %q", e.Message)
		}
		k.mustCall("auth.refresh", map[string]string{"token": env.Token(t, "alice")}, nil)

		evs := subjectEvents(t, env)
		if len(evs) != 1 {
			t.Fatalf("%d operator events, want 1", len(evs))
		}
		wantEvent(t, evs[0], "subject.signed_out", "alice", "root")
		if v, _ := labeledMetric(t, env.Server, "ballet_gateway_operator_actions_total", "action", "sign_out"); v != 1 {
			t.Fatalf("sign_out actions %v", v)
		}
		if v := metricValue(t, env.Server, "ballet_gateway_operator_closes_total"); v != 2 {
			t.Fatalf("operator closes %v, want 2", v)
		}
	})
}

// TestOperatorBlock: a block closes the subject's connections in both codecs within 2 s and
// refuses every token of it, even one issued later; unblocking accepts them again.
func TestOperatorBlock(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *gatewaytest.Options) {
		env := gatewaytest.Start(t, o)
		env.Project(t, "WEB", "alice", "viewer")
		root := env.Token(t, "root")
		ks := []*wsClient{login(t, env, codec.MsgPack, "alice"), login(t, env, codec.JSON, "alice")}

		start := time.Now()
		wantREST(t, env, "PUT", "/api/v1/admin/subjects/alice/block", root, http.StatusNoContent)
		closedWithin(t, start, ks...)
		nextSecond()
		fresh := env.Token(t, "alice")
		for _, c := range codecs {
			refusedAt(t, env, c, fresh, "blocked")
		}
		if body := wantREST(t, env, "GET", "/api/v1/projects", fresh, http.StatusUnauthorized); !strings.Contains(body, "blocked") {
			t.Fatalf("REST refusal %s", body)
		}
		wantREST(t, env, "PUT", "/api/v1/admin/subjects/root/block", root, http.StatusConflict)

		wantREST(t, env, "DELETE", "/api/v1/admin/subjects/alice/block", root, http.StatusNoContent)
		for _, c := range codecs {
			accepted(t, env, c, fresh)
		}
		evs := subjectEvents(t, env)
		if len(evs) != 2 {
			t.Fatalf("%d operator events, want 2", len(evs))
		}
		wantEvent(t, evs[0], "subject.blocked", "alice", "root")
		wantEvent(t, evs[1], "subject.unblocked", "alice", "root")
	})
}

// TestOperatorAccess: only BALLET_ADMIN_SUBJECTS may act: others get a 403 problem, a request
// without a token 401; nothing is recorded.
func TestOperatorAccess(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, AdminSubjects: []string{"root"}})
	alice := env.Token(t, "alice")
	for _, r := range []struct{ method, path string }{
		{"POST", "/api/v1/admin/subjects/bob/sign-out"},
		{"PUT", "/api/v1/admin/subjects/bob/block"},
		{"DELETE", "/api/v1/admin/subjects/bob/block"},
	} {
		body := wantREST(t, env, r.method, r.path, alice, http.StatusForbidden)
		var p struct {
			Status int
			Detail string
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != 403 || !strings.Contains(p.Detail, "BALLET_ADMIN_SUBJECTS") {
			t.Fatalf("%s %s: %s", r.method, r.path, body)
		}
		wantREST(t, env, r.method, r.path, "", http.StatusUnauthorized)
	}
	if evs := subjectEvents(t, env); len(evs) != 0 {
		t.Fatalf("refused actions recorded: %v", evs)
	}
}

// TestOperatorReplicas: a sign-out through one replica closes the subject's connections on
// the other, and a replica started after it refuses the old token.
func TestOperatorReplicas(t *testing.T) {
	a := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Tracker: true, AdminSubjects: []string{"root"}})
	b := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Database: a.DatabaseURL, Issuer: a.Issuer, Tracker: true})
	a.Project(t, "WEB", "alice", "viewer")
	old := a.Token(t, "alice")
	onB := login(t, b, codec.MsgPack, "alice")
	start := time.Now()
	wantREST(t, a, "POST", "/api/v1/admin/subjects/alice/sign-out", a.Token(t, "root"), http.StatusNoContent)
	closedWithin(t, start, onB)
	c := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Database: a.DatabaseURL, Issuer: a.Issuer, Tracker: true})
	refusedAt(t, c, codec.JSON, old, "signed_out")
	wantREST(t, c, "GET", "/api/v1/projects", old, http.StatusUnauthorized)
}

// TestOperatorBodyLimit: the operator routes take no body, and hold to their 1 KiB body limit
// all the same: a 2 KB body is refused with a 413 problem and nothing is recorded; a small one
// is read and ignored.
func TestOperatorBodyLimit(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, AdminSubjects: []string{"root"}})
	root := env.Token(t, "root")
	send := func(method, path string, body string) (*http.Response, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, env.BaseURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+root)
		resp, err := env.HTTP.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, r := range []struct{ method, path string }{
		{"POST", "/api/v1/admin/subjects/bob/sign-out"},
		{"PUT", "/api/v1/admin/subjects/bob/block"},
		{"DELETE", "/api/v1/admin/subjects/bob/block"},
	} {
		resp, body := send(r.method, r.path, strings.Repeat("x", 2<<10))
		var p struct{ Status int }
		if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal([]byte(body), &p) != nil || p.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s %s with 2 KB: %s %s %s, want a 413 problem", r.method, r.path, resp.Status, resp.Header.Get("Content-Type"), body)
		}
	}
	if evs := subjectEvents(t, env); len(evs) != 0 {
		t.Fatalf("refused actions recorded: %v", evs)
	}
	if resp, body := send("POST", "/api/v1/admin/subjects/bob/sign-out", "{}"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out with a small body: %s %s, want 204", resp.Status, body)
	}
}
