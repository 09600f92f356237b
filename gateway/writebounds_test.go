package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/tracker"
)

// restAnswer is what a REST request was answered: the status, the headers and the JSON body.
type restAnswer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// rest sends body (JSON, "" for none) to the gateway's REST API with token.
func rest(t *testing.T, env *gatewaytest.Env, token, method, path, body string) restAnswer {
	t.Helper()
	req, err := http.NewRequest(method, env.BaseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := restAnswer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
	}
	return a
}

// wantLimitProblem checks a problem refusing a request beyond the limit name of value max.
func (a restAnswer) wantLimitProblem(t *testing.T, status int, name string, max int, detail string) {
	t.Helper()
	if a.status != status || a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %s %s, want a %d problem", a.status, a.header.Get("Content-Type"), a.raw, status)
	}
	if a.body["limit"] != name || a.body["max"] != float64(max) || a.body["detail"] != detail {
		t.Fatalf("problem %s, want limit %s, max %d and detail %q", a.raw, name, max, detail)
	}
}

func itemBody(title, description string) string {
	b, _ := json.Marshal(map[string]string{"title": title, "description": description})
	return string(b)
}

// TestItemWriteBounds: titles are bounded in characters (BALLET_MAX_TITLE_CHARS, 500 here),
// descriptions in bytes of UTF-8 (BALLET_MAX_DESCRIPTION_BYTES, default 64 KiB), on create and
// on patch; beyond them REST answers 422 naming the field and the limit, beyond the body cap 413.
func TestItemWriteBounds(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Tracker: true, TrackerOptions: tracker.Options{MaxTitleChars: 500}})
	env.Project(t, "WEB", "alice", "member")
	alice := env.Token(t, "alice")
	const items = "/api/v1/projects/WEB/items"
	const descLimit = "description: longer than 65536 bytes"

	rest(t, env, alice, "POST", items, itemBody("t", strings.Repeat("d", 64<<10+1))).
		wantLimitProblem(t, 422, "description_bytes", 64<<10, descLimit)
	// 16,385 characters of four bytes: far fewer characters than bytes.
	rest(t, env, alice, "POST", items, itemBody("t", strings.Repeat("😀", 16<<10+1))).
		wantLimitProblem(t, 422, "description_bytes", 64<<10, descLimit)
	rest(t, env, alice, "POST", items, itemBody(strings.Repeat("t", 501), "")).
		wantLimitProblem(t, 422, "title_chars", 500, "title: longer than 500 characters")
	for _, body := range []string{
		itemBody(strings.Repeat("é", 500), strings.Repeat("d", 64<<10)),
		itemBody("t", strings.Repeat("😀", 16<<10)),
	} {
		if a := rest(t, env, alice, "POST", items, body); a.status != http.StatusCreated {
			t.Fatalf("an item at the limits: %d %.300s", a.status, a.raw)
		}
	}
	got := rest(t, env, alice, "GET", "/api/v1/items/WEB-1", "")
	if got.body["description"] != strings.Repeat("d", 64<<10) || got.body["title"] != strings.Repeat("é", 500) {
		t.Fatal("the item at the limits did not round-trip")
	}
	rest(t, env, alice, "PATCH", "/api/v1/items/WEB-1", `{"description":"`+strings.Repeat("d", 64<<10+1)+`"}`).
		wantLimitProblem(t, 422, "description_bytes", 64<<10, descLimit)
	rest(t, env, alice, "PATCH", "/api/v1/items/WEB-1", `{"title":"`+strings.Repeat("t", 501)+`"}`).
		wantLimitProblem(t, 422, "title_chars", 500, "title: longer than 500 characters")
	// Beyond the endpoint's body cap the body is not read: 413, as before.
	if a := rest(t, env, alice, "POST", items, itemBody("t", strings.Repeat("d", 1<<20))); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body beyond 1 MiB: %d %s", a.status, a.raw)
	}
}

// TestPlannerMessageBound: planner.send's text is bounded in bytes
// (BALLET_MAX_PLANNER_MESSAGE_BYTES, default 32 KiB); beyond it -32602 names the limit.
func TestPlannerMessageBound(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(nil)})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	k := login(t, env, codec.JSON, "alice")
	e := k.wantError("planner.send", map[string]any{"session": session, "text": strings.Repeat("x", 32<<10+1)}, -32602)
	if e.Message != "text: longer than 32768 bytes" {
		t.Fatalf("message %q, want it to name the limit", e.Message)
	}
	k.mustCall("planner.send", map[string]any{"session": session, "text": strings.Repeat("x", 32<<10)}, nil)
}

// TestPlannerTurnsPerSubject: one person's running turns are bounded across the deployment
// (BALLET_PLANNER_TURNS_PER_SUBJECT, default 4): with four slow turns on two replicas sharing
// a database, the fifth, on either, is -32029 planner_turns, counted where it was refused; another
// person's turn is not; once one of the four is cancelled, the fifth starts.
func TestPlannerTurnsPerSubject(t *testing.T) {
	// Turns that run until cancelled, or the test ends.
	script, err := provider.ParseScript(strings.NewReader(`{"rules": [
		{"match": "slow", "steps": [[{"text": "Thinking"}, {"pause_ms": 600000}, {"text": "never"}]]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	replica := func(db string, env *gatewaytest.Env) *gatewaytest.Env {
		m := gateway.NewMetrics()
		o := &gatewaytest.Options{Postgres: true, Database: db, Planner: provider.NewScripted(script), Metrics: m,
			PlannerOptions: planner.Options{Observer: m.PlannerObserver("scripted")}}
		if env != nil {
			o.Issuer = env.Issuer
		}
		return gatewaytest.Start(t, o)
	}
	a := replica("", nil)
	b := replica(a.DatabaseURL, a)
	a.Project(t, "WEB", "alice", "member", "bob", "member")
	var sessions []string
	for range 6 {
		sessions = append(sessions, createSession(t, a, a.Token(t, "alice")))
	}
	onA, onB := login(t, a, codec.JSON, "alice"), login(t, b, codec.MsgPack, "alice")
	for i, k := range []*wsClient{onA, onB, onA, onB} {
		k.mustCall("planner.send", map[string]any{"session": sessions[i], "text": "slow " + strconv.Itoa(i)}, nil)
	}
	for _, k := range []*wsClient{onA, onB} {
		if d := decodeLimit(t, k.c, k.call("planner.send", map[string]any{"session": sessions[4], "text": "slow 4"}, nil)); d.Limit != "planner_turns" || d.Max != 4 || d.RetryAfterMs != nil {
			t.Fatalf("the fifth turn: data %+v, want planner_turns of 4", d)
		}
	}
	for _, env := range []*gatewaytest.Env{a, b} {
		if n := limitRejections(t, env.Server, "planner_turns"); n != 1 {
			t.Fatalf("planner_turns rejections on a replica: %v, want 1", n)
		}
	}
	// Another person's turn counts against them, not her.
	bob := login(t, b, codec.JSON, "bob")
	bob.mustCall("planner.send", map[string]any{"session": sessions[5], "text": "slow bob"}, nil)

	onB.mustCall("planner.cancel", map[string]any{"session": sessions[1]}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		e := onA.call("planner.send", map[string]any{"session": sessions[4], "text": "slow 4"}, nil)
		if e == nil {
			break
		}
		if e.Code != -32029 || time.Now().After(deadline) {
			t.Fatalf("the fifth turn after a cancel: %+v", e)
		}
		time.Sleep(50 * time.Millisecond) // the cancelled turn gives its lease back as it ends
	}
	decodeLimit(t, onB.c, onB.call("planner.send", map[string]any{"session": sessions[1], "text": "slow 1"}, nil))
}

// TestPlannerSessionRate: one person creates at most BALLET_PLANNER_SESSION_RATE (default 30)
// sessions a minute on a replica; the next is 429 with Retry-After, counted as
// planner_sessions; another person is not held back.
func TestPlannerSessionRate(t *testing.T) {
	m := gateway.NewMetrics()
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Planner: provider.NewScripted(nil), Metrics: m,
		PlannerOptions: planner.Options{Observer: m.PlannerObserver("scripted")}})
	env.Project(t, "WEB", "alice", "member", "bob", "member")
	const sessions = "/api/v1/projects/WEB/planner/sessions"
	alice := env.Token(t, "alice")
	start := time.Now()
	for i := range 30 {
		if a := rest(t, env, alice, "POST", sessions, `{"title":"s"}`); a.status != http.StatusCreated {
			t.Fatalf("session %d: %d %s", i+1, a.status, a.raw)
		}
	}
	a := rest(t, env, alice, "POST", sessions, `{"title":"s"}`)
	if time.Since(start) >= time.Minute {
		t.Skip("the 31 requests took more than a minute")
	}
	a.wantLimitProblem(t, http.StatusTooManyRequests, "planner_sessions", 30,
		"limit reached: at most 30 planner sessions of one person a minute")
	if s, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Fatalf("Retry-After %q, want 1 to 60 seconds", a.header.Get("Retry-After"))
	}
	if n := limitRejections(t, env.Server, "planner_sessions"); n != 1 {
		t.Fatalf("planner_sessions rejections %v, want 1", n)
	}
	if a := rest(t, env, env.Token(t, "bob"), "POST", sessions, ""); a.status != http.StatusCreated {
		t.Fatalf("another person's session: %d %s", a.status, a.raw)
	}
}
