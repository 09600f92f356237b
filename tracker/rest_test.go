package tracker_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/streams/pgtest"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/pgstore"
)

func TestRESTErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *restEnv) {
		e.seed()
		// WEB-1 is at version 2 (its dependency on WEB-2).
		long := strings.Repeat("x", 201)
		huge := `{"title":"` + strings.Repeat("x", 1<<20) + `"}`
		expired := authtest.Mint(t, e.iss, "bob", auth.TokenOptions{Audience: []string{audience}, IssuedAt: time.Now().Add(-2 * time.Hour), TTL: time.Hour})
		otherAud := authtest.Mint(t, e.iss, "bob", auth.TokenOptions{Audience: []string{"other"}})
		cases := []struct {
			name                string
			method, path, sub   string
			body                string
			headers             []string
			status              int
			allow, authenticate string
		}{
			// Authentication, on every endpoint.
			{name: "no token", method: "GET", path: "/api/v1/projects", status: 401, authenticate: "Bearer"},
			{name: "garbage token", method: "GET", path: "/api/v1/projects", headers: []string{"Authorization", "Bearer nope"}, status: 401, authenticate: `Bearer error="invalid_token"`},
			{name: "expired token", method: "GET", path: "/api/v1/projects/WEB/items", headers: []string{"Authorization", "Bearer " + expired}, status: 401, authenticate: `Bearer error="invalid_token"`},
			{name: "other audience", method: "GET", path: "/api/v1/items/WEB-1", headers: []string{"Authorization", "Bearer " + otherAud}, status: 401, authenticate: `Bearer error="invalid_token"`},
			{name: "basic auth", method: "GET", path: "/api/v1/projects", headers: []string{"Authorization", "Basic Ym9iOng="}, status: 401, authenticate: "Bearer"},
			{name: "empty bearer", method: "GET", path: "/api/v1/projects", headers: []string{"Authorization", "Bearer "}, status: 401, authenticate: "Bearer"},
			{name: "no token create project", method: "POST", path: "/api/v1/projects", body: `{"key":"X","name":"x"}`, status: 401, authenticate: "Bearer"},
			{name: "no token get project", method: "GET", path: "/api/v1/projects/WEB", status: 401, authenticate: "Bearer"},
			{name: "no token member", method: "PUT", path: "/api/v1/projects/WEB/members/eve", body: `{"role":"viewer"}`, status: 401, authenticate: "Bearer"},
			{name: "no token create item", method: "POST", path: "/api/v1/projects/WEB/items", body: `{"title":"t"}`, status: 401, authenticate: "Bearer"},
			{name: "no token patch", method: "PATCH", path: "/api/v1/items/WEB-1", body: `{"title":"t"}`, status: 401, authenticate: "Bearer"},
			{name: "no token delete", method: "DELETE", path: "/api/v1/items/WEB-1", status: 401, authenticate: "Bearer"},
			{name: "no token dependency", method: "PUT", path: "/api/v1/items/WEB-1/dependencies/WEB-3", status: 401, authenticate: "Bearer"},

			// Routing.
			{name: "unknown path", method: "GET", path: "/api/v1/nope", sub: "bob", status: 404},
			{name: "trailing slash", method: "GET", path: "/api/v1/projects/WEB/items/", sub: "bob", status: 404},
			{name: "projects DELETE", method: "DELETE", path: "/api/v1/projects", sub: "root", status: 405, allow: "GET, HEAD, POST"},
			{name: "project POST", method: "POST", path: "/api/v1/projects/WEB", sub: "root", body: `{}`, status: 405, allow: "GET, HEAD"},
			{name: "member GET", method: "GET", path: "/api/v1/projects/WEB/members/bob", sub: "alice", status: 405, allow: "DELETE, PUT"},
			{name: "items PATCH", method: "PATCH", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{}`, status: 405, allow: "GET, HEAD, POST"},
			{name: "item PUT", method: "PUT", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, status: 405, allow: "DELETE, GET, HEAD, PATCH"},
			{name: "item POST", method: "POST", path: "/api/v1/items/WEB-1", sub: "bob", status: 405, allow: "DELETE, GET, HEAD, PATCH"},
			{name: "dependency GET", method: "GET", path: "/api/v1/items/WEB-1/dependencies/WEB-2", sub: "bob", status: 405, allow: "DELETE, PUT"},

			// POST /projects.
			{name: "create project by non-admin", method: "POST", path: "/api/v1/projects", sub: "alice", body: `{"key":"NEW","name":"n"}`, status: 403},
			{name: "create project text/plain", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"NEW","name":"n"}`, headers: []string{"Content-Type", "text/plain"}, status: 415},
			{name: "create project no content type", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"NEW","name":"n"}`, headers: []string{"Content-Type", ""}, status: 415},
			{name: "create project form", method: "POST", path: "/api/v1/projects", sub: "root", body: `key=NEW`, headers: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 415},
			{name: "create project truncated", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"NEW",`, status: 400},
			{name: "create project syntax", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key" "NEW"}`, status: 400},
			{name: "create project unknown field", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"NEW","name":"n","owner":"x"}`, status: 400},
			{name: "create project wrong type", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":7,"name":"n"}`, status: 400},
			{name: "create project null", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":null,"name":"n"}`, status: 400},
			{name: "create project array", method: "POST", path: "/api/v1/projects", sub: "root", body: `[{"key":"NEW","name":"n"}]`, status: 400},
			{name: "create project two objects", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"NEW","name":"n"} {}`, status: 400},
			{name: "create project empty body", method: "POST", path: "/api/v1/projects", sub: "root", headers: []string{"Content-Type", "application/json"}, status: 400},
			{name: "create project bad key", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"web","name":"n"}`, status: 422},
			{name: "create project no name", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"NEW"}`, status: 422},
			{name: "create project exists", method: "POST", path: "/api/v1/projects", sub: "root", body: `{"key":"WEB","name":"again"}`, status: 409},
			{name: "create project too large", method: "POST", path: "/api/v1/projects", sub: "root", body: huge, status: 413},

			// GET /projects/{key}.
			{name: "get missing project", method: "GET", path: "/api/v1/projects/NOPE", sub: "bob", status: 404},
			{name: "get project without role", method: "GET", path: "/api/v1/projects/API", sub: "bob", status: 403},

			// Members.
			{name: "grant by member", method: "PUT", path: "/api/v1/projects/WEB/members/eve", sub: "bob", body: `{"role":"viewer"}`, status: 403},
			{name: "grant by viewer", method: "PUT", path: "/api/v1/projects/WEB/members/eve", sub: "vic", body: `{"role":"viewer"}`, status: 403},
			{name: "grant by stranger", method: "PUT", path: "/api/v1/projects/WEB/members/eve", sub: "eve", body: `{"role":"admin"}`, status: 403},
			{name: "grant bad role", method: "PUT", path: "/api/v1/projects/WEB/members/eve", sub: "alice", body: `{"role":"owner"}`, status: 422},
			{name: "grant no role", method: "PUT", path: "/api/v1/projects/WEB/members/eve", sub: "alice", body: `{}`, status: 422},
			{name: "grant role wrong type", method: "PUT", path: "/api/v1/projects/WEB/members/eve", sub: "alice", body: `{"role":["admin"]}`, status: 400},
			{name: "grant text/plain", method: "PUT", path: "/api/v1/projects/WEB/members/eve", sub: "alice", body: `{"role":"viewer"}`, headers: []string{"Content-Type", "text/plain"}, status: 415},
			{name: "grant in missing project", method: "PUT", path: "/api/v1/projects/NOPE/members/eve", sub: "root", body: `{"role":"viewer"}`, status: 404},
			{name: "revoke non-member", method: "DELETE", path: "/api/v1/projects/WEB/members/eve", sub: "alice", status: 404},
			{name: "revoke by member", method: "DELETE", path: "/api/v1/projects/WEB/members/vic", sub: "bob", status: 403},
			{name: "revoke in missing project", method: "DELETE", path: "/api/v1/projects/NOPE/members/bob", sub: "root", status: 404},

			// Items of a project.
			{name: "list missing project", method: "GET", path: "/api/v1/projects/NOPE/items", sub: "bob", status: 404},
			{name: "list without role", method: "GET", path: "/api/v1/projects/API/items", sub: "bob", status: 403},
			{name: "list bad state", method: "GET", path: "/api/v1/projects/WEB/items?state=open", sub: "bob", status: 422},
			{name: "create item by viewer", method: "POST", path: "/api/v1/projects/WEB/items", sub: "vic", body: `{"title":"t"}`, status: 403},
			{name: "create item by stranger", method: "POST", path: "/api/v1/projects/WEB/items", sub: "eve", body: `{"title":"t"}`, status: 403},
			{name: "create item in missing project", method: "POST", path: "/api/v1/projects/NOPE/items", sub: "bob", body: `{"title":"t"}`, status: 404},
			{name: "create item no title", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"description":"d"}`, status: 422},
			{name: "create item blank title", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":"  "}`, status: 422},
			{name: "create item long title", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":"` + long + `"}`, status: 422},
			{name: "create item long description", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":"t","description":"` + strings.Repeat("d", 64<<10+1) + `"}`, status: 422},
			{name: "create item NUL", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":"a\u0000b"}`, status: 422},
			{name: "create item bad state", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":"t","state":"open"}`, status: 422},
			{name: "create item title number", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":42}`, status: 400},
			{name: "create item unknown field", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":"t","version":3}`, status: 400},
			{name: "create item text/plain", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: `{"title":"t"}`, headers: []string{"Content-Type", "text/plain; charset=utf-8"}, status: 415},
			{name: "create item too large", method: "POST", path: "/api/v1/projects/WEB/items", sub: "bob", body: huge, status: 413},

			// One item.
			{name: "get missing item", method: "GET", path: "/api/v1/items/WEB-99", sub: "bob", status: 404},
			{name: "get malformed key", method: "GET", path: "/api/v1/items/nonsense", sub: "bob", status: 404},
			{name: "get item of missing project", method: "GET", path: "/api/v1/items/NOPE-1", sub: "bob", status: 404},
			{name: "get item without role", method: "GET", path: "/api/v1/items/API-1", sub: "bob", status: 403},
			{name: "patch stale", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, headers: []string{"If-Match", `"1"`}, status: 412},
			{name: "patch stale bare", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, headers: []string{"If-Match", `1`}, status: 412},
			{name: "patch stale weak", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, headers: []string{"If-Match", `W/"3"`}, status: 412},
			{name: "patch opaque tag", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, headers: []string{"If-Match", `"abc"`}, status: 412},
			{name: "patch tag list", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, headers: []string{"If-Match", `"1", "2"`}, status: 400},
			{name: "patch broken tag", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, headers: []string{"If-Match", `"2`}, status: 400},
			{name: "patch bad state", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"state":"closed"}`, status: 422},
			{name: "patch empty title", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":""}`, status: 422},
			{name: "patch null title", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":null}`, status: 400},
			{name: "patch unknown field", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"titel":"t"}`, status: 400},
			{name: "patch wrong type", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"state":true}`, status: 400},
			{name: "patch by viewer", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "vic", body: `{"title":"t"}`, status: 403},
			{name: "patch missing item", method: "PATCH", path: "/api/v1/items/WEB-99", sub: "bob", body: `{"title":"t"}`, status: 404},
			{name: "patch text/plain", method: "PATCH", path: "/api/v1/items/WEB-1", sub: "bob", body: `{"title":"t"}`, headers: []string{"Content-Type", "text/plain"}, status: 415},
			{name: "delete stale", method: "DELETE", path: "/api/v1/items/WEB-1", sub: "bob", headers: []string{"If-Match", `"1"`}, status: 412},
			{name: "delete missing", method: "DELETE", path: "/api/v1/items/WEB-99", sub: "bob", status: 404},
			{name: "delete missing with star", method: "DELETE", path: "/api/v1/items/WEB-99", sub: "bob", headers: []string{"If-Match", `*`}, status: 404},
			{name: "delete by viewer", method: "DELETE", path: "/api/v1/items/WEB-1", sub: "vic", status: 403},
			{name: "delete without role", method: "DELETE", path: "/api/v1/items/API-1", sub: "bob", status: 403},

			// Dependencies.
			{name: "self dependency", method: "PUT", path: "/api/v1/items/WEB-1/dependencies/WEB-1", sub: "bob", status: 422},
			{name: "cross-project dependency", method: "PUT", path: "/api/v1/items/WEB-1/dependencies/API-1", sub: "bob", status: 422},
			{name: "cycle", method: "PUT", path: "/api/v1/items/WEB-2/dependencies/WEB-1", sub: "bob", status: 409},
			{name: "missing blocker", method: "PUT", path: "/api/v1/items/WEB-1/dependencies/WEB-99", sub: "bob", status: 404},
			{name: "missing blocked", method: "PUT", path: "/api/v1/items/WEB-99/dependencies/WEB-1", sub: "bob", status: 404},
			{name: "dependency by viewer", method: "PUT", path: "/api/v1/items/WEB-1/dependencies/WEB-3", sub: "vic", status: 403},
			{name: "dependency without role", method: "PUT", path: "/api/v1/items/API-1/dependencies/API-2", sub: "bob", status: 403},
			{name: "remove missing dependency", method: "DELETE", path: "/api/v1/items/WEB-3/dependencies/WEB-1", sub: "bob", status: 404},
			{name: "remove dependency by viewer", method: "DELETE", path: "/api/v1/items/WEB-1/dependencies/WEB-2", sub: "vic", status: 403},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := e.head()
				r := e.do(c.method, c.path, c.sub, c.body, c.headers...)
				wantProblem(t, r, c.status)
				if got := r.header.Get("Allow"); got != c.allow {
					t.Fatalf("Allow %q, want %q", got, c.allow)
				}
				if got := r.header.Get("WWW-Authenticate"); got != c.authenticate {
					t.Fatalf("WWW-Authenticate %q, want %q", got, c.authenticate)
				}
				if e.head() != before {
					t.Fatalf("a failed %s %s appended events", c.method, c.path)
				}
			})
		}
		// Nothing changed.
		var snap struct {
			Items []tracker.Item `json:"items"`
		}
		e.must(200, "GET", "/api/v1/projects/WEB/items", "bob", "").json(t, &snap)
		if len(snap.Items) != 3 || snap.Items[0].Title != "one" || snap.Items[0].Version != 2 {
			t.Fatalf("after the failures: %+v", snap.Items)
		}
	})
}

var timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestRESTFlow(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *restEnv) {
		start := e.head()
		r := e.must(201, "POST", "/api/v1/projects", "root", `{"key":"WEB","name":"Web site"}`)
		if r.header.Get("Location") != "/api/v1/projects/WEB" {
			t.Fatalf("Location %q", r.header.Get("Location"))
		}
		var p map[string]any
		r.json(t, &p)
		if p["key"] != "WEB" || p["name"] != "Web site" || p["role"] != "admin" || !timeRE.MatchString(p["created_at"].(string)) {
			t.Fatalf("project %s", r.body)
		}
		e.must(200, "PUT", "/api/v1/projects/WEB/members/alice", "root", `{"role":"admin"}`)
		r = e.must(200, "PUT", "/api/v1/projects/WEB/members/bob", "alice", `{"role":"member"}`)
		if string(r.body) != `{"project":"WEB","subject":"bob","role":"member"}`+"\n" {
			t.Fatalf("member %s", r.body)
		}
		// Subjects are path segments, escaped.
		e.must(200, "PUT", "/api/v1/projects/WEB/members/svc%2Fbot%20one", "alice", `{"role":"viewer"}`, "Content-Type", "application/merge-patch+json")
		e.must(204, "DELETE", "/api/v1/projects/WEB/members/svc%2Fbot%20one", "alice", "")
		e.must(200, "GET", "/api/v1/projects/WEB", "bob", "")

		var list struct {
			Projects []map[string]any `json:"projects"`
		}
		e.must(200, "GET", "/api/v1/projects", "bob", "").json(t, &list)
		if len(list.Projects) != 1 || list.Projects[0]["role"] != "member" {
			t.Fatalf("bob's projects %+v", list.Projects)
		}
		e.must(200, "GET", "/api/v1/projects", "eve", "").json(t, &list)
		if list.Projects == nil || len(list.Projects) != 0 {
			t.Fatalf("eve's projects %+v", list.Projects)
		}

		r = e.must(201, "POST", "/api/v1/projects/WEB/items", "bob", `{"title":"Login","description":"with SSO"}`)
		if r.header.Get("Location") != "/api/v1/items/WEB-1" || r.header.Get("ETag") != `"1"` || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("created: %v", r.header)
		}
		var raw map[string]any
		r.json(t, &raw)
		keys := slices.Sorted(maps.Keys(raw))
		if !slices.Equal(keys, []string{"blocked_by", "created_at", "description", "id", "key", "project", "state", "title", "updated_at", "version"}) {
			t.Fatalf("item fields %v", keys)
		}
		if raw["key"] != "WEB-1" || raw["project"] != "WEB" || raw["state"] != "backlog" || raw["version"] != 1.0 ||
			!timeRE.MatchString(raw["created_at"].(string)) || raw["created_at"] != raw["updated_at"] {
			t.Fatalf("item %s", r.body)
		}
		if bb, ok := raw["blocked_by"].([]any); !ok || len(bb) != 0 {
			t.Fatalf("blocked_by %v", raw["blocked_by"])
		}
		e.must(201, "POST", "/api/v1/projects/WEB/items", "bob", `{"title":"Signup","state":"ready"}`)

		r = e.must(200, "GET", "/api/v1/items/WEB-1", "bob", "")
		if r.header.Get("ETag") != `"1"` {
			t.Fatalf("ETag %q", r.header.Get("ETag"))
		}
		if r := e.must(200, "HEAD", "/api/v1/items/WEB-1", "bob", ""); len(r.body) != 0 || r.header.Get("ETag") != `"1"` {
			t.Fatalf("HEAD: %v %q", r.header, r.body)
		}
		// Every accepted If-Match form.
		for i, im := range []string{`"1"`, `2`, `W/"3"`, `*`, ``} {
			r = e.must(200, "PATCH", "/api/v1/items/WEB-1", "bob", `{"title":"Login `+itoa(i)+`"}`, "If-Match", im)
			if want := `"` + itoa(i+2) + `"`; r.header.Get("ETag") != want {
				t.Fatalf("after If-Match %s: ETag %q, want %s", im, r.header.Get("ETag"), want)
			}
		}
		var it tracker.Item
		e.must(200, "PATCH", "/api/v1/items/WEB-1", "bob", `{"state":"in_progress","description":""}`, "If-Match", `"6"`).json(t, &it)
		if it.Version != 7 || it.State != "in_progress" || it.Description != "" || it.Title != "Login 4" {
			t.Fatalf("patched %+v", it)
		}

		// Dependencies: 201, then 200 for the same; the blocked item's version moves.
		r = e.must(201, "PUT", "/api/v1/items/WEB-1/dependencies/WEB-2", "bob", "")
		r.json(t, &it)
		if it.Version != 8 || !slices.Equal(it.BlockedBy, []string{"WEB-2"}) || r.header.Get("ETag") != `"8"` ||
			r.header.Get("Location") != "/api/v1/items/WEB-1/dependencies/WEB-2" {
			t.Fatalf("dependency added: %+v %v", it, r.header)
		}
		e.must(200, "PUT", "/api/v1/items/WEB-1/dependencies/WEB-2", "bob", "").json(t, &it)
		if it.Version != 8 {
			t.Fatalf("idempotent PUT changed the version: %+v", it)
		}
		var snap struct {
			Seq   *int64         `json:"seq"`
			Items []tracker.Item `json:"items"`
		}
		e.must(200, "GET", "/api/v1/projects/WEB/items", "bob", "").json(t, &snap)
		if snap.Seq == nil || *snap.Seq != e.head() || len(snap.Items) != 2 || snap.Items[0].Key != "WEB-1" || snap.Items[1].Key != "WEB-2" {
			t.Fatalf("snapshot %+v (head %d)", snap, e.head())
		}
		e.must(200, "GET", "/api/v1/projects/WEB/items?state=ready&q=SIGN", "bob", "").json(t, &snap)
		if len(snap.Items) != 1 || snap.Items[0].Key != "WEB-2" {
			t.Fatalf("filtered %+v", snap.Items)
		}
		e.must(200, "DELETE", "/api/v1/items/WEB-1/dependencies/WEB-2", "bob", "").json(t, &it)
		if it.Version != 9 || len(it.BlockedBy) != 0 {
			t.Fatalf("dependency removed: %+v", it)
		}
		e.must(201, "PUT", "/api/v1/items/WEB-2/dependencies/WEB-1", "bob", "")

		// A service token writes as a service.
		e.must(200, "PUT", "/api/v1/projects/WEB/members/ci-bot", "alice", `{"role":"member"}`)
		svcToken := authtest.Mint(t, e.iss, "ci-bot", auth.TokenOptions{Audience: []string{audience}, ClientID: "ci-bot"})
		before := e.head()
		e.must(201, "POST", "/api/v1/projects/WEB/items", "", `{"title":"from CI"}`, "Authorization", "Bearer "+svcToken)
		evs, err := e.log.ReadAfter(t.Context(), before, 10)
		if err != nil || len(evs) != 1 || evs[0].ActorKind != "service" || evs[0].ActorSubject != "ci-bot" || evs[0].EntityKey != "WEB-3" {
			t.Fatalf("service write events %+v %v", evs, err)
		}

		// Deleting WEB-1 frees WEB-2.
		e.must(204, "DELETE", "/api/v1/items/WEB-1", "bob", "", "If-Match", `"9"`)
		e.must(404, "GET", "/api/v1/items/WEB-1", "bob", "")
		e.must(200, "GET", "/api/v1/items/WEB-2", "bob", "").json(t, &it)
		if len(it.BlockedBy) != 0 || it.Version != 3 {
			t.Fatalf("WEB-2 after the delete %+v", it)
		}

		// Revoked members lose access at once.
		e.must(204, "DELETE", "/api/v1/projects/WEB/members/bob", "alice", "")
		e.must(403, "GET", "/api/v1/projects/WEB/items", "bob", "")

		// Every write appended its events, with human actors.
		evs, err = e.log.ReadAfter(t.Context(), start, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
			if ev.ActorKind != "human" && ev.ActorSubject != "ci-bot" {
				t.Fatalf("event %+v", ev)
			}
		}
		want := strings.Fields(`project.created member.granted member.granted member.granted member.granted member.revoked
			item.created item.created item.updated item.updated item.updated item.updated item.updated
			item.updated item.state_changed dependency.added dependency.removed dependency.added
			member.granted item.created dependency.removed item.deleted member.revoked`)
		if !slices.Equal(types, want) {
			t.Fatalf("events\n %v\nwant\n %v", types, want)
		}
		var payload map[string]any
		if err := json.Unmarshal(evs[14].Payload, &payload); err != nil || payload["from"] != "backlog" || payload["to"] != "in_progress" {
			t.Fatalf("state_changed payload %s", evs[14].Payload)
		}
	})
}

// TestRESTInternalError: a failing database is a 500 whose detail says nothing of it; the
// cause goes to the log.
func TestRESTInternalError(t *testing.T) {
	pool := pgtest.Pool(t)
	iss := authtest.NewIssuer(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	svc := tracker.NewService(pgstore.New(pool), &tracker.Options{AdminSubjects: []string{"root"}})
	srv := httptest.NewServer(tracker.NewHandler(svc, authtest.NewVerifier(t, iss, audience), &tracker.HandlerOptions{Logger: logger}))
	t.Cleanup(srv.Close)
	e := &restEnv{t: t, url: srv.URL, iss: iss, http: srv.Client()}
	e.must(201, "POST", "/api/v1/projects", "root", `{"key":"WEB","name":"Web"}`)
	pool.Close()
	r := e.do("GET", "/api/v1/projects", "root", "")
	wantProblem(t, r, 500)
	if strings.Contains(string(r.body), "pool") || strings.Contains(string(r.body), "pgstore") {
		t.Fatalf("500 leaks: %s", r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "closed pool") {
		t.Fatalf("the cause was not logged: %s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
