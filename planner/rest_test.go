package planner_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/tracker"
)

const audience = "ballet-test"

type restEnv struct {
	b    *backend
	svc  *planner.Service
	url  string
	iss  *auth.Issuer
	http *http.Client
}

// newRESTEnv mounts the planner's handler beside the tracker's, as the gateway does.
func newRESTEnv(t *testing.T, kind string) *restEnv {
	b := newBackend(t, kind)
	svc, _ := b.service(t, nil, nil)
	iss := authtest.NewIssuer(t)
	v := authtest.NewVerifier(t, iss, audience)
	ph := planner.NewHandler(svc, v, nil)
	mux := http.NewServeMux()
	mux.Handle("/api/v1/projects/{project}/planner/sessions", ph)
	mux.Handle("/api/v1/planner/", ph)
	mux.Handle("/api/v1/", tracker.NewHandler(b.trk, v, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &restEnv{b: b, svc: svc, url: srv.URL, iss: iss, http: srv.Client()}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request as subject ("" for none; "bot" gets a client-credentials token).
func (e *restEnv) do(t *testing.T, method, path, subject, contentType, body string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	switch subject {
	case "":
	case "forged":
		req.Header.Set("Authorization", "Bearer not.a.token")
	default:
		o := auth.TokenOptions{Audience: []string{audience}}
		if subject == "bot" {
			o.ClientID = "bot"
		}
		req.Header.Set("Authorization", "Bearer "+authtest.Mint(t, e.iss, subject, o))
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, data}
}

type sessionJSON struct {
	ID        string `json:"id"`
	Project   string `json:"project"`
	Title     string `json:"title"`
	CreatedBy string `json:"created_by"`
	CreatedAt string `json:"created_at"`
	Running   *bool  `json:"running"`
	Messages  []struct {
		Seq       int64           `json:"seq"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CreatedAt string          `json:"created_at"`
	} `json:"messages"`
}

func decodeJSON(t *testing.T, r reply, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
}

func TestREST(t *testing.T) {
	for _, kind := range []string{"memory", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newRESTEnv(t, kind)
			const sessions = "/api/v1/projects/WEB/planner/sessions"
			const jsonType = "application/json"

			r := e.do(t, "POST", sessions, "alice", jsonType, `{"title": "Sprint 12"}`)
			if r.status != http.StatusCreated {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			var s1 sessionJSON
			decodeJSON(t, r, &s1)
			if !planner.ValidID(s1.ID) || s1.Project != "WEB" || s1.Title != "Sprint 12" || s1.CreatedBy != "alice" ||
				s1.Running == nil || *s1.Running || s1.Messages != nil || r.header.Get("Location") != "/api/v1/planner/sessions/"+s1.ID {
				t.Fatalf("created %s (Location %q)", r.body, r.header.Get("Location"))
			}
			if _, err := time.Parse(time.RFC3339, s1.CreatedAt); err != nil {
				t.Fatalf("created_at %q", s1.CreatedAt)
			}
			r = e.do(t, "POST", sessions, "alice", "", "")
			var s2 sessionJSON
			decodeJSON(t, r, &s2)
			if r.status != http.StatusCreated || s2.Title != "" {
				t.Fatalf("create without a body: %d %s", r.status, r.body)
			}

			r = e.do(t, "GET", sessions, "victor", "", "")
			var list struct {
				Sessions []sessionJSON `json:"sessions"`
			}
			decodeJSON(t, r, &list)
			if r.status != http.StatusOK || len(list.Sessions) != 2 || list.Sessions[0].ID != s2.ID || list.Sessions[1].ID != s1.ID {
				t.Fatalf("list: %d %s", r.status, r.body)
			}

			// A turn, then the transcript.
			w := watch(t, e.svc, alice, s1.ID)
			if _, err := e.svc.Send(ctxT(t), alice, s1.ID, "please plan"); err != nil {
				t.Fatal(err)
			}
			w.until(t, planner.OutputDone)
			r = e.do(t, "GET", "/api/v1/planner/sessions/"+s1.ID, "victor", "", "")
			var got sessionJSON
			decodeJSON(t, r, &got)
			if r.status != http.StatusOK || got.ID != s1.ID || got.Title != "Sprint 12" || len(got.Messages) != 6 {
				t.Fatalf("get: %d %s", r.status, r.body)
			}
			for i, m := range got.Messages {
				if m.Seq != int64(i+1) || m.CreatedAt == "" {
					t.Fatalf("message %d: %+v", i, m)
				}
			}
			if string(got.Messages[0].Content) != `"please plan"` || got.Messages[0].Role != "human" {
				t.Fatalf("human message %+v", got.Messages[0])
			}
			var a struct {
				Text      string `json:"text"`
				ToolCalls []struct {
					ID    string          `json:"id"`
					Name  string          `json:"name"`
					Input json.RawMessage `json:"input"`
				} `json:"tool_calls"`
			}
			if err := json.Unmarshal(got.Messages[1].Content, &a); err != nil || got.Messages[1].Role != "assistant" ||
				a.Text != "Creating the item." || len(a.ToolCalls) != 1 || a.ToolCalls[0].Name != "create_item" {
				t.Fatalf("assistant message %s", got.Messages[1].Content)
			}
			var tr struct {
				Results []struct {
					ToolUseID string `json:"tool_use_id"`
					Tool      string `json:"tool"`
					Text      string `json:"text"`
					IsError   *bool  `json:"is_error"`
				} `json:"results"`
			}
			if err := json.Unmarshal(got.Messages[2].Content, &tr); err != nil || got.Messages[2].Role != "tool" || len(tr.Results) != 1 ||
				tr.Results[0].ToolUseID != a.ToolCalls[0].ID || tr.Results[0].IsError == nil || *tr.Results[0].IsError {
				t.Fatalf("tool message %s", got.Messages[2].Content)
			}

			// The tracker's routes still answer beside the planner's.
			if r := e.do(t, "GET", "/api/v1/projects/WEB/items", "alice", "", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), "Alpha") {
				t.Fatalf("tracker items: %d %s", r.status, r.body)
			}

			errorCases := []struct {
				name, method, path, subject, ctype, body string
				status                                   int
			}{
				{"no token", "GET", sessions, "", "", "", 401},
				{"invalid token", "GET", sessions, "forged", "", "", 401},
				{"viewer creates", "POST", sessions, "victor", jsonType, `{}`, 403},
				{"service creates", "POST", sessions, "bot", jsonType, `{}`, 403},
				{"non-member lists", "GET", sessions, "mallory", "", "", 403},
				{"non-member reads", "GET", "/api/v1/planner/sessions/" + s1.ID, "mallory", "", "", 404}, // not found or not theirs: one answer
				{"unknown project", "GET", "/api/v1/projects/NOPE/planner/sessions", "alice", "", "", 404},
				{"unknown session", "GET", "/api/v1/planner/sessions/" + tracker.NewID(time.Now()), "alice", "", "", 404},
				{"malformed session", "GET", "/api/v1/planner/sessions/nope", "alice", "", "", 404},
				{"unknown path", "GET", "/api/v1/planner/elsewhere", "alice", "", "", 404},
				{"long title", "POST", sessions, "alice", jsonType, `{"title": "` + strings.Repeat("t", 201) + `"}`, 422},
				{"malformed JSON", "POST", sessions, "alice", jsonType, `{"title": `, 400},
				{"unknown field", "POST", sessions, "alice", jsonType, `{"name": "x"}`, 400},
				{"wrong type", "POST", sessions, "alice", jsonType, `{"title": 7}`, 400},
				{"not JSON", "POST", sessions, "alice", "text/plain", `title`, 415},
				{"method", "DELETE", "/api/v1/planner/sessions/" + s1.ID, "alice", "", "", 405},
			}
			for _, tc := range errorCases {
				r := e.do(t, tc.method, tc.path, tc.subject, tc.ctype, tc.body)
				var p struct {
					Title  string `json:"title"`
					Status int    `json:"status"`
					Detail string `json:"detail"`
				}
				if r.status != tc.status || r.header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s: %d %s %s, want %d problem", tc.name, r.status, r.header.Get("Content-Type"), r.body, tc.status)
					continue
				}
				decodeJSON(t, r, &p)
				if p.Status != tc.status || p.Title == "" || p.Detail == "" {
					t.Errorf("%s: problem %s", tc.name, r.body)
				}
			}
		})
	}
}
