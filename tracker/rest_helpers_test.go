package tracker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/memstore"
	"github.com/ballet/gateway/tracker/pgstore"
)

const audience = "ballet-test"

// restEnv is the REST handler on a loopback server with a real issuer and verifier.
type restEnv struct {
	t    *testing.T
	url  string
	iss  *auth.Issuer
	log  streams.Log
	svc  *tracker.Service
	http *http.Client

	mu     sync.Mutex
	tokens map[string]string // by subject
}

// forEachStore runs f against the memory store and the Postgres store.
func forEachStore(t *testing.T, f func(t *testing.T, e *restEnv)) {
	for _, kind := range []string{"memory", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, newREST(t, kind))
		})
	}
}

func newREST(t *testing.T, kind string) *restEnv {
	t.Helper()
	var (
		store tracker.Store
		log   streams.Log
	)
	switch kind {
	case "memory":
		l := memlog.New()
		t.Cleanup(func() { l.Close() })
		store, log = memstore.New(l), l
	case "postgres":
		pool := pgtest.Pool(t)
		l, err := pglog.Open(t.Context(), pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		store, log = pgstore.New(pool), l
	}
	iss := authtest.NewIssuer(t)
	svc := tracker.NewService(store, &tracker.Options{AdminSubjects: []string{"root"}})
	srv := httptest.NewServer(tracker.NewHandler(svc, authtest.NewVerifier(t, iss, audience), nil))
	t.Cleanup(srv.Close)
	return &restEnv{t: t, url: srv.URL, iss: iss, log: log, svc: svc, http: srv.Client()}
}

func (e *restEnv) token(subject string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if tok, ok := e.tokens[subject]; ok {
		return tok, nil
	}
	tok, err := e.iss.Mint(subject, auth.TokenOptions{Audience: []string{audience}})
	if err != nil {
		return "", err
	}
	if e.tokens == nil {
		e.tokens = map[string]string{}
	}
	e.tokens[subject] = tok
	return tok, nil
}

func (e *restEnv) head() int64 {
	e.t.Helper()
	n, err := e.log.Head(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d %s: %v", r.status, r.body, err)
	}
}

// send sends a request; it is safe to call from any goroutine. The body is sent as
// application/json unless headers say otherwise; an "Authorization" header overrides the
// subject's token; a header given with an empty value is removed.
func (e *restEnv) send(method, path, subject, body string, headers ...string) (*response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if subject != "" {
		tok, err := e.token(subject)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (e *restEnv) do(method, path, subject, body string, headers ...string) *response {
	e.t.Helper()
	r, err := e.send(method, path, subject, body, headers...)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// must sends a request and fails unless the status is want.
func (e *restEnv) must(want int, method, path, subject, body string, headers ...string) *response {
	e.t.Helper()
	r := e.do(method, path, subject, body, headers...)
	if r.status != want {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r
}

// seed creates WEB (alice admin, bob member, vic viewer, bot member) with WEB-1 blocked by
// WEB-2 and WEB-3, and API (carol member) with API-1.
func (e *restEnv) seed() {
	e.t.Helper()
	e.must(201, "POST", "/api/v1/projects", "root", `{"key":"WEB","name":"Web"}`)
	for _, m := range [][2]string{{"alice", "admin"}, {"bob", "member"}, {"vic", "viewer"}, {"bot", "member"}} {
		e.must(200, "PUT", "/api/v1/projects/WEB/members/"+m[0], "root", `{"role":"`+m[1]+`"}`)
	}
	e.must(201, "POST", "/api/v1/projects", "root", `{"key":"API","name":"API"}`)
	e.must(200, "PUT", "/api/v1/projects/API/members/carol", "root", `{"role":"member"}`)
	for _, title := range []string{"one", "two", "three"} {
		e.must(201, "POST", "/api/v1/projects/WEB/items", "bob", `{"title":"`+title+`"}`)
	}
	e.must(201, "POST", "/api/v1/projects/API/items", "carol", `{"title":"api"}`)
	e.must(201, "PUT", "/api/v1/items/WEB-1/dependencies/WEB-2", "bob", "")
}

// wantProblem checks an RFC 7807 answer.
func wantProblem(t *testing.T, r *response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d %s, want %d", r.status, r.body, status)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q for %d %s", ct, r.status, r.body)
	}
	var p map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem %s: %v", r.body, err)
	}
	if p["type"] != "about:blank" || p["title"] != http.StatusText(status) || p["status"] != json.Number(itoa(status)) {
		t.Fatalf("problem %s for status %d", r.body, status)
	}
	fields := 4
	if _, limited := p["limit"].(string); limited && p["max"] != nil {
		fields = 6 // a limit refused it: its name and its value
	}
	if d, _ := p["detail"].(string); d == "" || len(p) != fields {
		t.Fatalf("problem %s: want type, title, status and detail (and limit and max)", r.body)
	}
	if r.header.Get("ETag") != "" {
		t.Fatalf("problem with an ETag: %v", r.header)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// itemsPage is one page of a project's items as REST answers it.
type itemsPage struct {
	Seq   *int64          `json:"seq"`
	Items []tracker.Item  `json:"items"`
	Next  json.RawMessage `json:"next"` // a string, or null on the last page
}

// listPages loads project's items page by page as subject, query holding the first page's
// parameters ("?limit=7&state=ready", or ""), following next; between runs after each page
// but the last. Every page must be a 200 with a seq, items and next.
func (e *restEnv) listPages(subject, project, query string, between func(page int)) []itemsPage {
	e.t.Helper()
	var pages []itemsPage
	path := "/api/v1/projects/" + project + "/items" + query
	for {
		var p itemsPage
		e.must(200, "GET", path, subject, "").json(e.t, &p)
		if p.Seq == nil || p.Items == nil || p.Next == nil {
			e.t.Fatalf("GET %s: page %d lacks seq, items or next", path, len(pages)+1)
		}
		pages = append(pages, p)
		if string(p.Next) == "null" {
			return pages
		}
		var next string
		if err := json.Unmarshal(p.Next, &next); err != nil || next == "" {
			e.t.Fatalf("GET %s: next %s", path, p.Next)
		}
		if between != nil {
			between(len(pages))
		}
		sep := "?"
		if query != "" {
			sep = query + "&"
		}
		path = "/api/v1/projects/" + project + "/items" + sep + "after=" + url.QueryEscape(next)
	}
}

// itemLists turns REST pages into the store's, for trackertest.NewPagedReplica.
func itemLists(pages []itemsPage) []tracker.ItemList {
	lists := make([]tracker.ItemList, len(pages))
	for i, p := range pages {
		lists[i] = tracker.ItemList{Items: p.Items, Seq: *p.Seq}
	}
	return lists
}

// pageKeys returns the keys of the items of pages, in order.
func pageKeys(pages []itemsPage) []string {
	var keys []string
	for _, p := range pages {
		for _, it := range p.Items {
			keys = append(keys, it.Key)
		}
	}
	return keys
}
