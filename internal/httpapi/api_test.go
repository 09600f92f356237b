package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

const audience = "httpapi-test"

var errGone = errors.New("gone")

// classify is a service's mapping: errGone is a 404 with a detail, anything else a 500.
func classify(err error) (int, string) {
	if errors.Is(err, errGone) {
		return http.StatusNotFound, "the thing is gone"
	}
	return http.StatusInternalServerError, ""
}

type answer struct {
	status int
	header http.Header
	body   string
}

// problem decodes an answer as an RFC 7807 document, failing unless it is one of status.
func (a answer) problem(t *testing.T, status int) string {
	t.Helper()
	if a.status != status || a.header.Get("Content-Type") != "application/problem+json" || a.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v %s, want a %d problem", a.status, a.header, a.body, status)
	}
	var p map[string]any
	dec := json.NewDecoder(strings.NewReader(a.body))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		t.Fatal(err)
	}
	d, _ := p["detail"].(string)
	if p["type"] != "about:blank" || p["title"] != http.StatusText(status) || p["status"] != json.Number(strconv.Itoa(status)) || d == "" || len(p) != 4 {
		t.Fatalf("problem %s", a.body)
	}
	return d
}

func serve(t *testing.T, h http.Handler, method, target, token, contentType, body string) answer {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", token)
	}
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return answer{w.Code, w.Result().Header, string(b)}
}

func TestRoute(t *testing.T) {
	iss := authtest.NewIssuer(t)
	var logs bytes.Buffer // handlers run on this goroutine: serve calls ServeHTTP
	api := httpapi.New(httpapi.Config{Name: "things", Verifier: authtest.NewVerifier(t, iss, audience), Classify: classify},
		&httpapi.HandlerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h := httpapi.Route(api, func(p *auth.Principal) string { return p.Subject }, httpapi.Methods[string]{
		"GET": func(w http.ResponseWriter, r *http.Request, who string) error {
			switch r.URL.Query().Get("fail") {
			case "gone":
				w.Header().Set("ETag", `"1"`)
				return errGone
			case "secret":
				w.Header().Set("Location", "/elsewhere")
				return errors.New("secret internals")
			case "conflict":
				return &httpapi.Error{Status: http.StatusConflict, Detail: "busy", Header: http.Header{"Retry-After": {"1"}}}
			}
			return httpapi.WriteJSON(w, http.StatusOK, map[string]string{"caller": who})
		},
		"POST": func(w http.ResponseWriter, r *http.Request, who string) error { return nil },
	})
	bearer := "Bearer " + authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{audience}})

	a := serve(t, h, "GET", "/", bearer, "", "")
	if a.status != 200 || a.body != `{"caller":"alice"}`+"\n" || a.header.Get("Content-Type") != "application/json" || a.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET: %d %v %s", a.status, a.header, a.body)
	}
	if a := serve(t, h, "HEAD", "/", bearer, "", ""); a.status != 200 {
		t.Fatalf("HEAD: %d %s", a.status, a.body)
	}
	for _, c := range []struct{ name, token, authenticate string }{
		{"none", "", "Bearer"},
		{"basic", "Basic Ym9iOng=", "Bearer"},
		{"empty bearer", "Bearer  ", "Bearer"},
		{"forged", "Bearer not.a.token", `Bearer error="invalid_token"`},
	} {
		a := serve(t, h, "GET", "/", c.token, "", "")
		a.problem(t, 401)
		if got := a.header.Get("WWW-Authenticate"); got != c.authenticate {
			t.Errorf("%s: WWW-Authenticate %q, want %q", c.name, got, c.authenticate)
		}
	}
	a = serve(t, h, "DELETE", "/", bearer, "", "")
	a.problem(t, 405)
	if a.header.Get("Allow") != "GET, HEAD, POST" {
		t.Fatalf("Allow %q", a.header.Get("Allow"))
	}
	a = serve(t, h, "GET", "/?fail=gone", bearer, "", "")
	if d := a.problem(t, 404); d != "the thing is gone" || a.header.Get("ETag") != "" {
		t.Fatalf("classified error: %q, ETag %q", d, a.header.Get("ETag"))
	}
	a = serve(t, h, "GET", "/?fail=conflict", bearer, "", "")
	if d := a.problem(t, 409); d != "busy" || a.header.Get("Retry-After") != "1" {
		t.Fatalf("request error: %q, Retry-After %q", d, a.header.Get("Retry-After"))
	}
	a = serve(t, h, "GET", "/?fail=secret", bearer, "", "")
	if d := a.problem(t, 500); strings.Contains(d, "secret") || a.header.Get("Location") != "" {
		t.Fatalf("500 detail %q, Location %q", d, a.header.Get("Location"))
	}
	if l := logs.String(); !strings.Contains(l, "things request failed") || !strings.Contains(l, "secret internals") {
		t.Fatalf("the 500 was not logged: %s", l)
	}
	if d := serve(t, api.NotFound(), "GET", "/nope", "", "", "").problem(t, 404); d != "no such resource" {
		t.Fatalf("NotFound detail %q", d)
	}
}

// TestUnavailableIssuer: a token that cannot be checked is a 503 with Retry-After, not a 401.
func TestUnavailableIssuer(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	iss, err := auth.NewIssuer(srv.URL+authtest.IssuerPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle(authtest.IssuerPath+"/", iss)
	v := authtest.NewVerifier(t, iss, audience)
	bearer := "Bearer " + authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{audience}})
	srv.Close() // the key set was never fetched
	api := httpapi.New(httpapi.Config{Name: "things", Verifier: v}, &httpapi.HandlerOptions{Logger: slog.New(slog.DiscardHandler)})
	h := httpapi.Route(api, func(p *auth.Principal) *auth.Principal { return p }, httpapi.Methods[*auth.Principal]{
		"GET": func(http.ResponseWriter, *http.Request, *auth.Principal) error { return nil },
	})
	a := serve(t, h, "GET", "/", bearer, "", "")
	a.problem(t, 503)
	if a.header.Get("Retry-After") != "5" {
		t.Fatalf("Retry-After %q", a.header.Get("Retry-After"))
	}
}

// A surface without Classify answers its service's errors by package fault: the kind's status
// and the error's detail, a limit's name and value, and 500 for an error of no kind.
func TestDefaultClassify(t *testing.T) {
	iss := authtest.NewIssuer(t)
	api := httpapi.New(httpapi.Config{Name: "things", Verifier: authtest.NewVerifier(t, iss, audience)},
		&httpapi.HandlerOptions{Logger: slog.New(slog.DiscardHandler)})
	errMissing := fault.New(fault.NotFound, "things: not found")
	bearer := "Bearer " + authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{audience}})
	for _, c := range []struct {
		err    error
		status int
		body   string
	}{
		{fmt.Errorf("load: %w", fault.Errorf(errMissing, "thing %d not found", 7)), 404,
			`{"type":"about:blank","title":"Not Found","status":404,"detail":"thing 7 not found"}`},
		{&fault.Error{Kind: fault.Invalid, Detail: "name: longer than 9 characters", Limit: "name_chars", Max: 9}, 422,
			`{"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"name: longer than 9 characters","limit":"name_chars","max":9}`},
		{errors.New("secret internals"), 500,
			`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"the server could not complete the request; it has been logged"}`},
	} {
		h := httpapi.Route(api, func(p *auth.Principal) string { return p.Subject }, failWith(c.err))
		if a := serve(t, h, "GET", "/", bearer, "", ""); a.status != c.status || a.body != c.body+"\n" {
			t.Errorf("%v: %d %s, want %d %s", c.err, a.status, a.body, c.status, c.body)
		}
	}
}

// tooMany is an error a limit refused.
type tooMany struct{ retry time.Duration }

func (tooMany) Error() string                           { return "too many things" }
func (e tooMany) Limited() (string, int, time.Duration) { return "things", 3, e.retry }
func classifyTooMany(error) (int, string)               { return http.StatusTooManyRequests, "too many things" }
func failWith(err error) httpapi.Methods[string] {
	return httpapi.Methods[string]{"GET": func(http.ResponseWriter, *http.Request, string) error { return err }}
}

// TestLimitedProblem: an error a limit refused names the limit and its value in the problem,
// and its retry, rounded up to whole seconds, is the Retry-After.
func TestLimitedProblem(t *testing.T) {
	iss := authtest.NewIssuer(t)
	api := httpapi.New(httpapi.Config{Name: "things", Verifier: authtest.NewVerifier(t, iss, audience), Classify: classifyTooMany}, nil)
	bearer := "Bearer " + authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{audience}})
	for _, c := range []struct {
		retry time.Duration
		want  string
	}{{1500 * time.Millisecond, "2"}, {time.Millisecond, "1"}, {0, ""}} {
		h := httpapi.Route(api, func(p *auth.Principal) string { return p.Subject }, failWith(fmt.Errorf("wrapped: %w", tooMany{c.retry})))
		a := serve(t, h, "GET", "/", bearer, "", "")
		var p struct {
			Status int
			Detail string
			Limit  string
			Max    int
		}
		if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != 429 || p.Limit != "things" || p.Max != 3 || p.Detail != "too many things" {
			t.Fatalf("retry %v: %d %s", c.retry, a.status, a.body)
		}
		if got := a.header.Get("Retry-After"); got != c.want {
			t.Fatalf("retry %v: Retry-After %q, want %q", c.retry, got, c.want)
		}
	}
}
