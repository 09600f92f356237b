package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// anthropicAPI is a loopback server speaking the Messages API's SSE format: the n-th request
// gets answers[n] (the last repeats).
type anthropicAPI struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	answers []http.HandlerFunc
}

func newAnthropicAPI(t *testing.T, answers ...http.HandlerFunc) *anthropicAPI {
	t.Helper()
	a := &anthropicAPI{answers: answers}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		n := len(a.bodies)
		a.bodies = append(a.bodies, body)
		a.headers = append(a.headers, r.Header.Clone())
		answer := a.answers[min(n, len(a.answers)-1)]
		a.mu.Unlock()
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		answer(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *anthropicAPI) provider(t *testing.T) provider.Provider {
	t.Helper()
	p, err := provider.NewAnthropic(&provider.AnthropicOptions{
		BaseURL: a.srv.URL, APIKey: "sk-test", HTTPClient: a.srv.Client(),
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (a *anthropicAPI) requests() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.bodies)
}

func sseEvent(name string, data any) string {
	b, _ := json.Marshal(data)
	return "event: " + name + "\ndata: " + string(b) + "\n\n"
}

// anthropicStream answers with a message of text pieces and then tool calls (name, input
// pairs), flushing after each event.
func anthropicStream(texts []string, tools ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var evs []string
		evs = append(evs, sseEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-test",
			"usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}}))
		index := 0
		if len(texts) > 0 {
			evs = append(evs, sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}))
			for _, s := range texts {
				evs = append(evs, sseEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": s}}))
			}
			evs = append(evs, sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}))
			index++
		}
		for i := 0; i+1 < len(tools); i += 2 {
			evs = append(evs, sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": index,
				"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", index), "name": tools[i], "input": map[string]any{}}}))
			input := tools[i+1]
			half := len(input) / 2
			for _, part := range []string{input[:half], input[half:]} {
				evs = append(evs, sseEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}}))
			}
			evs = append(evs, sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": index}))
			index++
		}
		stop := "end_turn"
		if len(tools) > 0 {
			stop = "tool_use"
		}
		evs = append(evs, sseEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]int{"output_tokens": 12}}))
		evs = append(evs, sseEvent("message_stop", map[string]any{"type": "message_stop"}))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range evs {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

func TestAnthropicFullTurn(t *testing.T) {
	api := newAnthropicAPI(t,
		anthropicStream([]string{"Let me ", "create it."}, "create_item", `{"title": "From the model", "state": "ready"}`),
		anthropicStream([]string{"Created ", "WEB-1."}),
	)
	b := newBackend(t, "memory")
	svc, _ := b.service(t, &planner.Options{Provider: api.provider(t)}, nil)
	id := b.newSession(t, svc)
	w := watch(t, svc, alice, id)
	if _, err := svc.Send(ctxT(t), alice, id, "add an item"); err != nil {
		t.Fatal(err)
	}
	got := shape(w.until(t, planner.OutputDone))
	want := []string{
		"message 1",
		"text Let me create it.",
		`tool_call create_item {"title":"From the model","state":"ready"}`,
		"message 2",
		"tool_result create_item ok",
		"message 3",
		"text Created WEB-1.",
		"message 4",
		"done end_turn",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("output:\n%s", strings.Join(got, "\n"))
	}
	it, err := b.trk.GetItem(ctxT(t), aliceActor, "WEB-1")
	if err != nil || it.Title != "From the model" || it.State != "ready" {
		t.Fatalf("item %+v, %v", it, err)
	}

	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var second struct {
		Model    string `json:"model"`
		System   string `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				Text      string `json:"text"`
				ID        string `json:"id"`
				Name      string `json:"name"`
				ToolUseID string `json:"tool_use_id"`
				Content   string `json:"content"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[1], &second); err != nil {
		t.Fatal(err)
	}
	m := second.Messages
	if len(m) != 3 || m[0].Role != "user" || m[0].Content[0].Text != "add an item" ||
		m[1].Role != "assistant" || m[1].Content[0].Text != "Let me create it." || m[1].Content[1].Type != "tool_use" ||
		m[1].Content[1].ID != "toolu_01" || m[2].Role != "user" || m[2].Content[0].Type != "tool_result" ||
		m[2].Content[0].ToolUseID != "toolu_01" || !strings.Contains(m[2].Content[0].Content, `"key":"WEB-1"`) {
		t.Fatalf("second request: %s", reqs[1])
	}
	var names []string
	for _, tool := range second.Tools {
		names = append(names, tool.Name)
		if !json.Valid(tool.InputSchema) {
			t.Errorf("tool %s schema %s", tool.Name, tool.InputSchema)
		}
	}
	for _, n := range []string{"list_items", "get_item", "create_item", "update_item", "set_state", "add_dependency", "remove_dependency"} {
		if !slices.Contains(names, n) {
			t.Errorf("tool %s not offered: %v", n, names)
		}
	}
	if !strings.Contains(second.System, "Project: WEB") {
		t.Errorf("system prompt %q", second.System)
	}
}

func TestAnthropicFailures(t *testing.T) {
	overloaded := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}
	malformed := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{}})+
			"event: content_block_delta\ndata: {not json\n\n")
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	tests := []struct {
		name    string
		answer  http.HandlerFunc
		baseURL string
		want    string
	}{
		{"overloaded after retries", overloaded, "", "error the model provider failed: anthropic: 529 overloaded_error: Overloaded"},
		{"malformed stream", malformed, "", "error the model provider sent a malformed answer"},
		{"connection refused", nil, closed.URL, "error the model provider failed: anthropic: connection_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newAnthropicAPI(t, tc.answer)
			p := api.provider(t)
			if tc.baseURL != "" {
				var err error
				p, err = provider.NewAnthropic(&provider.AnthropicOptions{BaseURL: tc.baseURL, APIKey: "sk-test", MaxRetries: -1})
				if err != nil {
					t.Fatal(err)
				}
			}
			b := newBackend(t, "memory")
			svc, _ := b.service(t, &planner.Options{Provider: p}, nil)
			id := b.newSession(t, svc)
			w := watch(t, svc, alice, id)
			if _, err := svc.Send(ctxT(t), alice, id, "hi"); err != nil {
				t.Fatal(err)
			}
			got := shape(w.until(t, planner.OutputDone))
			if len(got) != 3 || !strings.HasPrefix(got[1], tc.want) || got[2] != "done error" {
				t.Fatalf("output %v, want %q then done error", got, tc.want)
			}
			if strings.Contains(strings.Join(got, " "), "sk-test") {
				t.Fatal("the API key reached the output")
			}
			if msgs := transcript(t, svc, id); roles(msgs) != "human" {
				t.Fatalf("transcript %s", roles(msgs))
			}
			if tc.baseURL != "" {
				return
			}
			if tc.name == "overloaded after retries" && len(api.requests()) != 1+provider.DefaultMaxRetries {
				t.Fatalf("%d attempts, want %d", len(api.requests()), 1+provider.DefaultMaxRetries)
			}
			// The provider recovers; so does the session.
			api.mu.Lock()
			api.answers = []http.HandlerFunc{anthropicStream([]string{"Back again."})}
			api.mu.Unlock()
			if _, err := svc.Send(ctxT(t), alice, id, "hi again"); err != nil {
				t.Fatal(err)
			}
			if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
				t.Fatalf("output after recovery %v", got)
			}
		})
	}
}
