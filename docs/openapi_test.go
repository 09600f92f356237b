package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
)

// The REST API: the routes the server serves are exactly the paths and methods of
// openapi.yaml and of protocol.md's REST table, and what the server answers matches the
// schemas, statuses and headers that openapi.yaml gives.

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// documentedPaths returns openapi.yaml's paths with their methods, upper-case and sorted.
func documentedPaths(t *testing.T, doc map[string]any) map[string][]string {
	t.Helper()
	paths, _ := at(doc, "paths").(map[string]any)
	out := map[string][]string{}
	for p, item := range paths {
		for _, m := range httpMethods {
			if at(item, m) != nil {
				out[p] = append(out[p], strings.ToUpper(m))
			}
		}
		slices.Sort(out[p])
	}
	return out
}

var paramRE = regexp.MustCompile(`\{[^}]*\}`)

// concrete fills a path template with its path parameters' examples.
func concrete(t *testing.T, doc map[string]any, path string) string {
	t.Helper()
	params, _ := at(doc, "paths", path, "parameters").([]any)
	return paramRE.ReplaceAllStringFunc(path, func(p string) string {
		name := p[1 : len(p)-1]
		for _, prm := range params {
			prm = deref(t, doc, prm)
			if at(prm, "name") == name && at(prm, "in") == "path" {
				if ex, ok := at(prm, "example").(string); ok {
					return url.PathEscape(ex)
				}
			}
		}
		t.Fatalf("openapi.yaml %s: path parameter %s has no example", path, name)
		return ""
	})
}

func startGateway(t *testing.T) *gatewaytest.Env {
	t.Helper()
	return gatewaytest.Start(t, &gatewaytest.Options{
		Planner: provider.NewScripted(provider.DefaultScript()), AdminSubjects: []string{"root"},
	})
}

// TestOpenAPIRoutes: every route the REST API serves (its Router's Endpoints) is a path of
// openapi.yaml with the same methods, and the other way round; each documented operation is
// reached through the client port (401 without a token, 405 with Allow for another method);
// the paths outside /api/v1/ are answered on the port their servers name.
func TestOpenAPIRoutes(t *testing.T) {
	doc := descriptions(t).OpenAPI
	env := startGateway(t)
	documented := documentedPaths(t, doc)

	served := map[string][]string{}
	for _, e := range env.API.Endpoints() {
		served[e.Pattern] = e.Methods
	}
	for p, ms := range served {
		if !slices.Equal(documented[p], ms) {
			t.Errorf("the server serves %s %v; openapi.yaml documents %v", p, ms, documented[p])
		}
	}
	for p, ms := range documented {
		if strings.HasPrefix(p, "/api/") && served[p] == nil {
			t.Errorf("openapi.yaml documents %s %v; the server serves no such route", p, ms)
		}
	}

	client := env.HTTP.Client()
	for _, p := range slices.Sorted(maps.Keys(documented)) {
		if !strings.HasPrefix(p, "/api/") {
			continue
		}
		target := env.BaseURL + concrete(t, doc, p)
		for _, m := range documented[p] {
			resp := send(t, client, m, target, "", nil)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" ||
				resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s without a token: %d %v, want a 401 problem", m, p, resp.StatusCode, resp.Header)
			}
		}
		other := "PATCH"
		for _, m := range []string{"PATCH", "PUT", "POST", "DELETE"} {
			if !slices.Contains(documented[p], m) {
				other = m
				break
			}
		}
		allow := slices.Clone(documented[p])
		if slices.Contains(allow, "GET") {
			allow = append(allow, "HEAD")
			slices.Sort(allow)
		}
		resp := send(t, client, other, target, "", nil)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != strings.Join(allow, ", ") {
			t.Errorf("%s %s: %d, Allow %q; want 405, Allow %q", other, p, resp.StatusCode, resp.Header.Get("Allow"), strings.Join(allow, ", "))
		}
	}

	for _, p := range slices.Sorted(maps.Keys(documented)) {
		if strings.HasPrefix(p, "/api/") {
			continue
		}
		h, port := env.Server.Handler(), "client"
		if srv, _ := at(doc, "paths", p, "servers", 0, "url").(string); strings.HasSuffix(srv, ":8081") {
			h, port = env.Server.AdminHandler(), "admin"
		}
		for _, m := range documented[p] {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(m, p, nil))
			if at(doc, "paths", p, strings.ToLower(m), "responses", strconv.Itoa(w.Code)) == nil || w.Code == http.StatusNotFound {
				t.Errorf("%s %s on the %s port: %d, which openapi.yaml does not document", m, p, port, w.Code)
			}
		}
	}
}

// TestRESTTableInProtocol: protocol.md's REST table lists exactly openapi.yaml's /api/v1/
// operations.
func TestRESTTableInProtocol(t *testing.T) {
	doc := descriptions(t).OpenAPI
	row := regexp.MustCompile("(?m)^\\| `(GET|POST|PUT|PATCH|DELETE) (/api/v1/[^` ]+)`")
	var inProtocol, inOpenAPI []string
	for _, m := range row.FindAllStringSubmatch(section(t, "REST"), -1) {
		inProtocol = append(inProtocol, m[1]+" "+paramRE.ReplaceAllString(m[2], "{}"))
	}
	for p, ms := range documentedPaths(t, doc) {
		for _, m := range ms {
			if strings.HasPrefix(p, "/api/") {
				inOpenAPI = append(inOpenAPI, m+" "+paramRE.ReplaceAllString(p, "{}"))
			}
		}
	}
	slices.Sort(inProtocol)
	slices.Sort(inOpenAPI)
	if !slices.Equal(inProtocol, inOpenAPI) {
		t.Errorf("protocol.md's REST table has\n%s\nopenapi.yaml\n%s", strings.Join(inProtocol, "\n"), strings.Join(inOpenAPI, "\n"))
	}
}

func send(t *testing.T, c *http.Client, method, target, token string, body []byte, header ...string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// exchange is one request and what the server answered, for check.mjs --responses.
type exchange struct {
	Path        string              `json:"path"` // openapi.yaml's path template
	Method      string              `json:"method"`
	Status      int                 `json:"status"`
	ContentType string              `json:"contentType"`
	Headers     map[string][]string `json:"headers"`
	Body        any                 `json:"body"`
}

// TestOpenAPIResponses drives every documented operation against a running gateway, and
// some of their failures, and has check.mjs validate each answer: a status openapi.yaml
// documents for the operation (405 against MethodNotAllowed), its content type and schema,
// and the headers it lists.
func TestOpenAPIResponses(t *testing.T) {
	doc := descriptions(t).OpenAPI
	env := startGateway(t)
	c := env.HTTP.Client()
	root, alice, bob := env.Token(t, "root"), env.Token(t, "alice"), env.Token(t, "bob")
	var log []exchange
	seen := map[string]bool{}
	base := env.BaseURL
	call := func(path, method, target, token, body string, header ...string) *http.Response {
		t.Helper()
		var b []byte
		if body != "" {
			b = []byte(body)
			header = append(header, "Content-Type", "application/json")
		}
		resp := send(t, c, method, base+target, token, b, header...)
		e := exchange{Path: path, Method: method, Status: resp.StatusCode, Headers: resp.Header}
		e.ContentType, _, _ = strings.Cut(resp.Header.Get("Content-Type"), ";")
		raw, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		if strings.HasSuffix(e.ContentType, "json") && e.ContentType != "application/x-ndjson" { // NDJSON: lines
			if err := json.Unmarshal(raw, &e.Body); err != nil {
				t.Fatalf("%s %s: %v: %s", method, target, err, raw)
			}
		} else if len(raw) > 0 {
			e.Body = string(raw)
		}
		log = append(log, e)
		seen[method+" "+path] = true
		return resp
	}
	const (
		projects = "/api/v1/projects"
		project  = "/api/v1/projects/{project}"
		member   = "/api/v1/projects/{project}/members/{subject}"
		items    = "/api/v1/projects/{project}/items"
		item     = "/api/v1/items/{item}"
		dep      = "/api/v1/items/{item}/dependencies/{blocker}"
		sessions = "/api/v1/projects/{project}/planner/sessions"
		session  = "/api/v1/planner/sessions/{session}"
		signOut  = "/api/v1/admin/subjects/{subject}/sign-out"
		block    = "/api/v1/admin/subjects/{subject}/block"
		conns    = "/api/v1/admin/connections"
	)
	call(projects, "POST", projects, root, `{"key":"WEB","name":"Web site"}`)
	call(projects, "POST", projects, root, `{"key":"WEB","name":"Again"}`)          // 409
	call(projects, "POST", projects, alice, `{"key":"APP","name":"App"}`)           // 403
	call(projects, "POST", projects, root, `{"key":"web","name":"Lower case"}`)     // 422
	call(projects, "POST", projects, root, `{"key":"APP","nam":"App"}`)             // 400
	call(projects, "POST", projects, root, "key=APP", "Content-Type", "text/plain") // 415
	call(projects, "POST", projects, root, `{"key":"APP","name":"`+strings.Repeat("x", 1<<20)+`"}`)
	call(projects, "GET", projects, root, "")
	call(projects, "GET", projects, "", "")   // 401
	call(projects, "PUT", projects, root, "") // 405
	call(member, "PUT", "/api/v1/projects/WEB/members/alice", root, `{"role":"member"}`)
	call(member, "PUT", "/api/v1/projects/WEB/members/alice", root, `{"role":"owner"}`) // 422
	call(member, "PUT", "/api/v1/projects/NOPE/members/alice", root, `{"role":"member"}`)
	call(project, "GET", "/api/v1/projects/WEB", alice, "")
	call(project, "GET", "/api/v1/projects/WEB", bob, "") // 403
	call(items, "POST", "/api/v1/projects/WEB/items", alice, `{"title":"Login page"}`)
	call(items, "POST", "/api/v1/projects/WEB/items", alice, `{"title":"Password reset form","description":"The form and its mail.","state":"ready"}`)
	call(items, "POST", "/api/v1/projects/WEB/items", alice, `{"title":""}`) // 422
	// 422 naming the limit.
	call(items, "POST", "/api/v1/projects/WEB/items", alice, `{"title":"t","description":"`+strings.Repeat("d", 64<<10+1)+`"}`)
	call(items, "GET", "/api/v1/projects/WEB/items", alice, "")
	call(items, "GET", "/api/v1/projects/WEB/items?state=ready&q=form", alice, "")
	var page struct{ Next *string }
	if err := json.NewDecoder(call(items, "GET", "/api/v1/projects/WEB/items?limit=1", alice, "").Body).Decode(&page); err != nil || page.Next == nil {
		t.Fatalf("a page of one item: next %v, %v", page.Next, err)
	}
	call(items, "GET", "/api/v1/projects/WEB/items?limit=1&after="+url.QueryEscape(*page.Next), alice, "")
	call(items, "GET", "/api/v1/projects/WEB/items?limit=0", alice, "")        // 400
	call(items, "GET", "/api/v1/projects/WEB/items?after=nonsense", alice, "") // 400
	call(item, "GET", "/api/v1/items/WEB-1", alice, "")
	call(item, "GET", "/api/v1/items/WEB-99", alice, "") // 404
	call(item, "PATCH", "/api/v1/items/WEB-1", alice, `{"state":"in_progress"}`, "If-Match", `"1"`)
	call(item, "PATCH", "/api/v1/items/WEB-1", alice, `{"state":"done"}`, "If-Match", `"1"`) // 412
	call(item, "PATCH", "/api/v1/items/WEB-1", alice, `{"state":"done"}`, "If-Match", `"1", "2"`)
	call(dep, "PUT", "/api/v1/items/WEB-2/dependencies/WEB-1", alice, "")
	call(dep, "PUT", "/api/v1/items/WEB-2/dependencies/WEB-1", alice, "") // 200
	call(dep, "PUT", "/api/v1/items/WEB-1/dependencies/WEB-2", alice, "") // 409
	call(dep, "PUT", "/api/v1/items/WEB-1/dependencies/WEB-1", alice, "") // 422
	call(dep, "DELETE", "/api/v1/items/WEB-2/dependencies/WEB-1", alice, "")
	resp := call(sessions, "POST", "/api/v1/projects/WEB/planner/sessions", alice, `{"title":"Login work"}`)
	var sess struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil || sess.ID == "" {
		t.Fatalf("the session: %v", err)
	}
	call(sessions, "POST", "/api/v1/projects/WEB/planner/sessions", alice, "")
	call(sessions, "GET", "/api/v1/projects/WEB/planner/sessions", alice, "")
	call(sessions, "GET", "/api/v1/projects/WEB/planner/sessions?limit=1", alice, "")
	call(sessions, "GET", "/api/v1/projects/WEB/planner/sessions?limit=501", alice, "") // 400
	call(session, "GET", "/api/v1/planner/sessions/"+sess.ID, alice, "")
	call(item, "DELETE", "/api/v1/items/WEB-2", alice, "", "If-Match", `"2"`) // 412
	call(item, "DELETE", "/api/v1/items/WEB-2", alice, "")
	call(member, "DELETE", "/api/v1/projects/WEB/members/alice", root, "")
	call(signOut, "POST", "/api/v1/admin/subjects/bob/sign-out", root, "")
	call(signOut, "POST", "/api/v1/admin/subjects/bob/sign-out", alice, "") // 403
	call(block, "PUT", "/api/v1/admin/subjects/bob/block", root, "")
	call(block, "PUT", "/api/v1/admin/subjects/root/block", root, "")                         // 409
	call(block, "PUT", "/api/v1/admin/subjects/"+strings.Repeat("b", 256)+"/block", root, "") // 422
	call(block, "DELETE", "/api/v1/admin/subjects/bob/block", root, "")
	rpc, err := client.Dial(context.Background(), env.URL, &client.Options{Token: client.StaticToken(alice)})
	if err != nil {
		t.Fatal(err)
	}
	defer rpc.Close()
	var listing struct {
		Connections []struct{ Subject, Codec string }
	}
	if err := json.NewDecoder(call(conns, "GET", conns, root, "").Body).Decode(&listing); err != nil ||
		len(listing.Connections) != 1 || listing.Connections[0].Subject != "alice" || listing.Connections[0].Codec != "msgpack" {
		t.Fatalf("the listing of alice's connection: %+v, %v", listing, err)
	}
	call(conns, "GET", conns+"?subject=alice&limit=1", root, "")
	call(conns, "GET", conns, alice, "")                                     // 403
	call(conns, "GET", conns+"?limit=10001", root, "")                       // 400
	call(conns, "GET", conns+"?subject="+strings.Repeat("a", 256), root, "") // 422
	for range 31 {                                                           // the sessions of one person a minute, and one more: 429
		call(sessions, "POST", "/api/v1/projects/WEB/planner/sessions", root, "")
	}
	call("/healthz", "GET", "/healthz", "", "")
	ping := `{"jsonrpc":"2.0","id":1,"method":"system.ping"}`
	call("/rpc", "POST", "/rpc", alice, ping)
	call("/rpc", "POST", "/rpc", alice, ping, "Accept", "text/event-stream")
	call("/rpc", "POST", "/rpc", "", ping)                                                                                                 // 401
	call("/rpc", "POST", "/rpc", alice, `{"jsonrpc":"2.0","id":1,"method":"system.ping","params":{"x":"`+strings.Repeat("a", 1<<20)+`"}}`) // 413
	// A subject's requests beyond BALLET_REST_RATE (1 a second here, in bursts of 2): 429.
	limited := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, RESTRate: 1})
	base, c = limited.BaseURL, limited.HTTP.Client()
	for range 3 {
		call(projects, "GET", projects, limited.Token(t, "alice"), "")
	}
	if last := log[len(log)-1]; last.Status != http.StatusTooManyRequests {
		t.Errorf("the third request at 1 a second: %d, want 429", last.Status)
	}

	for p, ms := range documentedPaths(t, doc) {
		for _, m := range ms {
			if !seen[m+" "+p] && !slices.Contains([]string{"/readyz", "/metrics"}, p) {
				t.Errorf("%s %s is not exercised", m, p)
			}
		}
	}
	// The admin port's paths, served by the same server.
	for _, p := range []string{"/readyz", "/metrics"} {
		w := httptest.NewRecorder()
		env.Server.AdminHandler().ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		ct, _, _ := strings.Cut(w.Header().Get("Content-Type"), ";")
		log = append(log, exchange{Path: p, Method: "GET", Status: w.Code, ContentType: ct, Headers: w.Header(), Body: w.Body.String()})
	}

	file := filepath.Join(t.TempDir(), "responses.json")
	b, err := json.Marshal(log)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A deadline for a hung validator only: on a loaded machine node takes minutes to start.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "check.mjs", "--responses", file)
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node check.mjs --responses: %v\n%s", err, out)
	}
}
