package httpapi_test

import (
	"log/slog"
	"net/http"
	"reflect"
	"testing"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/internal/httpapi"
)

// TestRouterJoin: two surfaces' Routers joined serve every route of both, list them with
// their methods, and answer anything else with a 404 problem.
func TestRouterJoin(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := authtest.NewVerifier(t, iss, audience)
	bearer := "Bearer " + authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{audience}})
	quiet := &httpapi.HandlerOptions{Logger: slog.New(slog.DiscardHandler)}
	answer := func(name string) httpapi.Methods[string] {
		f := func(w http.ResponseWriter, r *http.Request, who string) error {
			return httpapi.WriteJSON(w, http.StatusOK, map[string]string{"route": name, "item": r.PathValue("item")})
		}
		return httpapi.Methods[string]{"PUT": f, "GET": f}
	}
	as := func(p *auth.Principal) string { return p.Subject }

	things := httpapi.New(httpapi.Config{Name: "things", Verifier: v}, quiet)
	a := things.NewRouter()
	a.Handle("/things/{item}", httpapi.Route(things, as, answer("things")))
	others := httpapi.New(httpapi.Config{Name: "others", Verifier: v}, quiet)
	b := others.NewRouter()
	b.Handle("/things/{item}/others", httpapi.Route(others, as, answer("others")))
	joined := httpapi.Join(a, b)

	want := []httpapi.Endpoint{
		{Pattern: "/things/{item}", Methods: []string{"GET", "PUT"}},
		{Pattern: "/things/{item}/others", Methods: []string{"GET", "PUT"}},
	}
	got := joined.Endpoints()
	for i := range got {
		got[i] = httpapi.Endpoint{Pattern: got[i].Pattern, Methods: got[i].Methods}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Endpoints() = %v, want %v", got, want)
	}
	for target, body := range map[string]string{
		"/things/7":        `{"item":"7","route":"things"}` + "\n",
		"/things/7/others": `{"item":"7","route":"others"}` + "\n",
	} {
		if a := serve(t, joined, "GET", target, bearer, "", ""); a.status != 200 || a.body != body {
			t.Errorf("GET %s: %d %s", target, a.status, a.body)
		}
	}
	if d := serve(t, joined, "GET", "/things", bearer, "", "").problem(t, 404); d != "no such resource" {
		t.Fatalf("unrouted path: %q", d)
	}
	if a := serve(t, joined, "DELETE", "/things/7/others", bearer, "", ""); a.header.Get("Allow") != "GET, HEAD, PUT" {
		a.problem(t, 405)
		t.Fatalf("Allow %q", a.header.Get("Allow"))
	}

	for name, f := range map[string]func(){
		"a plain handler":   func() { a.Handle("/plain", http.NotFoundHandler()) },
		"a conflict":        func() { httpapi.Join(a, a) },
		"a handler to join": func() { httpapi.Join(a, http.NotFoundHandler()) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
