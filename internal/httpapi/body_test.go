package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/internal/httpapi"
)

func TestDecodeBody(t *testing.T) {
	iss := authtest.NewIssuer(t)
	api := httpapi.New(httpapi.Config{Name: "things", Verifier: authtest.NewVerifier(t, iss, audience), MaxBodyBytes: 64}, nil)
	type req struct {
		Title string  `json:"title"`
		State *string `json:"state"`
	}
	var got req
	decode := func(optional bool) func(w http.ResponseWriter, r *http.Request, _ string) error {
		return func(w http.ResponseWriter, r *http.Request, _ string) error {
			got = req{Title: "unchanged"}
			if optional {
				return api.DecodeOptionalBody(w, r, &got)
			}
			return api.DecodeBody(w, r, &got)
		}
	}
	h := httpapi.Route(api, func(p *auth.Principal) string { return p.Subject }, httpapi.Methods[string]{
		"POST": decode(false), "PUT": decode(true),
	})
	bearer := "Bearer " + authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{audience}})
	const js = "application/json"
	long := `{"title":"` + strings.Repeat("x", 64) + `"}`
	for _, c := range []struct {
		name        string
		optional    bool
		contentType string
		body        string
		status      int
		title       string
	}{
		{"object", false, js, ` {"title":"t"} `, 200, "t"},
		{"+json", false, "application/merge-patch+json; charset=utf-8", `{"title":"t"}`, 200, "t"},
		{"text", false, "text/plain", `{"title":"t"}`, 415, ""},
		{"no content type", false, "", `{"title":"t"}`, 415, ""},
		{"too large", false, js, long, 413, ""},
		{"text and too large", false, "text/plain", long, 415, ""},
		{"empty", false, js, "", 400, ""},
		{"array", false, js, `[]`, 400, ""},
		{"truncated", false, js, `{"title":`, 400, ""},
		{"syntax", false, js, `{"title" "t"}`, 400, ""},
		{"unknown field", false, js, `{"name":"t"}`, 400, ""},
		{"wrong type", false, js, `{"title":7}`, 400, ""},
		{"null", false, js, `{"title":null}`, 400, ""},
		{"two objects", false, js, `{} {}`, 400, ""},
		{"optional empty", true, "", "", 200, "unchanged"},
		{"optional blank text", true, "text/plain", " \n", 200, "unchanged"},
		{"optional object", true, js, `{"title":"t"}`, 200, "t"},
		{"optional null", true, js, `{"title":null,"state":null}`, 200, "unchanged"},
		{"optional text", true, "text/plain", `{"title":"t"}`, 415, ""},
		{"optional too large", true, "text/plain", long, 413, ""},
		{"optional unknown field", true, js, `{"name":"t"}`, 400, ""},
	} {
		method := "POST"
		if c.optional {
			method = "PUT"
		}
		a := serve(t, h, method, "/", bearer, c.contentType, c.body)
		if c.status != 200 {
			a.problem(t, c.status)
			continue
		}
		if a.status != 200 || got.Title != c.title || got.State != nil {
			t.Errorf("%s: %d %s, decoded %+v", c.name, a.status, a.body, got)
		}
	}
}
