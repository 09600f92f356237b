package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const openaiKey = "sk-proj-test-SECRET-9876543210"

// ochunk frames one chat.completion.chunk with the given choices JSON.
func ochunk(choices string) string {
	return fmt.Sprintf("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_1\",\"choices\":%s,\"usage\":null}\n\n", choices)
}

func oContent(text string) string {
	t, _ := json.Marshal(text)
	return ochunk(fmt.Sprintf(`[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null}]`, t))
}

func oFinish(reason string) string {
	return ochunk(fmt.Sprintf(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":%q}]`, reason))
}

var (
	oRole  = ochunk(`[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`)
	oUsage = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":25,\"completion_tokens\":15,\"total_tokens\":40}}\n\n"
	oDone  = "data: [DONE]\n\n"
)

func oHelloStream() []string {
	return []string{oRole, oContent("Hello"), oContent(" world"), oFinish("stop"), oUsage, oDone}
}

func oErrorBody(typ, msg string) string {
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

func newTestOpenAI(t *testing.T, f *fakeAPI, o *OpenAIOptions) *OpenAI {
	t.Helper()
	if o == nil {
		o = &OpenAIOptions{APIKey: openaiKey}
	}
	o.BaseURL = f.srv.URL + "/v1"
	o.HTTPClient = f.srv.Client()
	if o.Sleep == nil {
		o.Sleep = (&sleepRecorder{}).sleep
	}
	p, err := NewOpenAI(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenAITextStreaming(t *testing.T) {
	f := newFakeAPI(t, sse(oHelloStream()...))
	p := newTestOpenAI(t, f, &OpenAIOptions{APIKey: openaiKey, Model: "qwen2.5"})
	deltas, resp, err := collect(context.Background(), p, &Request{System: "You plan.", Messages: []Message{userText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{{Type: DeltaText, Text: "Hello"}, {Type: DeltaText, Text: " world"}}
	if !reflect.DeepEqual(deltas, want) {
		t.Fatalf("deltas %+v", deltas)
	}
	wantResp := &Response{Content: []Block{{Type: BlockText, Text: "Hello world"}}, StopReason: StopEndTurn, Usage: Usage{InputTokens: 25, OutputTokens: 15}}
	if !reflect.DeepEqual(resp, wantResp) {
		t.Fatalf("response %+v", resp)
	}
	r := f.requests()[0]
	if r.method != http.MethodPost || r.path != "/v1/chat/completions" {
		t.Errorf("request %s %s", r.method, r.path)
	}
	if got := r.header.Get("Authorization"); got != "Bearer "+openaiKey {
		t.Errorf("Authorization %q", got)
	}
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	wantBody := map[string]any{
		"model": "qwen2.5", "stream": true, "stream_options": map[string]any{"include_usage": true}, "max_tokens": float64(4096),
		"messages": []any{
			map[string]any{"role": "system", "content": "You plan."},
			map[string]any{"role": "user", "content": "hi"},
		},
	}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("body %s", r.body)
	}
}

func TestOpenAIWithoutKeySendsNoAuthorization(t *testing.T) {
	f := newFakeAPI(t, sse(oHelloStream()...))
	p := newTestOpenAI(t, f, &OpenAIOptions{})
	if _, _, err := collect(context.Background(), p, &Request{Messages: []Message{userText("hi")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.requests()[0].header["Authorization"]; ok {
		t.Error("Authorization sent without a key")
	}
}

func TestOpenAIToolUseTwoRounds(t *testing.T) {
	round1 := []string{oRole, oContent("Creating it."),
		ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_A","type":"function","function":{"name":"create_item","arguments":""}}]},"logprobs":null,"finish_reason":null}]`),
		ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"title\": \"Fix"}}]},"logprobs":null,"finish_reason":null}]`),
		ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_B","type":"function","function":{"name":"list_items","arguments":""}}]},"logprobs":null,"finish_reason":null}]`),
		ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" login\"}"}}]},"logprobs":null,"finish_reason":null}]`),
		oFinish("tool_calls"), oUsage, oDone}
	round2 := []string{oRole, oContent("Done: WEB-7."), oFinish("stop"), oUsage, oDone}
	f := newFakeAPI(t, sse(round1...), sse(round2...))
	p := newTestOpenAI(t, f, nil)
	tools := []Tool{
		{Name: "create_item", Description: "Create an item", InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`)},
		{Name: "list_items", Description: "List items"},
	}
	req := &Request{System: "sys", Messages: []Message{userText("create Fix login")}, Tools: tools}

	var order []string
	resp, err := p.Stream(context.Background(), req, func(d Delta) error {
		order = append(order, d.Type+":"+d.Text+d.Name+string(d.Input))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOrder := []string{"text:Creating it.", `tool_call:create_item{"title":"Fix login"}`, "tool_call:list_items{}"}
	if !reflect.DeepEqual(order, wantOrder) {
		t.Fatalf("deltas %q", order)
	}
	if resp.StopReason != StopToolUse || len(resp.Content) != 3 || resp.Content[1].ToolUseID != "call_A" || resp.Content[2].ToolUseID != "call_B" {
		t.Fatalf("response %+v", resp)
	}

	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, Content: resp.Content},
		Message{Role: RoleUser, Content: []Block{
			{Type: BlockToolResult, ToolUseID: "call_A", Text: "created WEB-7"},
			{Type: BlockToolResult, ToolUseID: "call_B", Text: "permission denied", IsError: true},
			{Type: BlockText, Text: "and hurry"},
		}})
	deltas, resp, err := collect(context.Background(), p, req)
	if err != nil || textOfDeltas(deltas) != "Done: WEB-7." || resp.StopReason != StopEndTurn {
		t.Fatalf("round 2: %v %+v %+v", err, deltas, resp)
	}

	var body struct {
		Messages []map[string]any `json:"messages"`
		Tools    []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(f.requests()[1].body, &body); err != nil {
		t.Fatal(err)
	}
	wantMessages := []map[string]any{
		{"role": "system", "content": "sys"},
		{"role": "user", "content": "create Fix login"},
		{"role": "assistant", "content": "Creating it.", "tool_calls": []any{
			map[string]any{"id": "call_A", "type": "function", "function": map[string]any{"name": "create_item", "arguments": `{"title":"Fix login"}`}},
			map[string]any{"id": "call_B", "type": "function", "function": map[string]any{"name": "list_items", "arguments": `{}`}},
		}},
		{"role": "tool", "tool_call_id": "call_A", "content": "created WEB-7"},
		{"role": "tool", "tool_call_id": "call_B", "content": "Error: permission denied"},
		{"role": "user", "content": "and hurry"},
	}
	if !reflect.DeepEqual(body.Messages, wantMessages) {
		got, _ := json.MarshalIndent(body.Messages, "", " ")
		t.Errorf("messages %s", got)
	}
	wantTools := []map[string]any{
		{"type": "function", "function": map[string]any{"name": "create_item", "description": "Create an item", "parameters": map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}}},
		{"type": "function", "function": map[string]any{"name": "list_items", "description": "List items", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}},
	}
	if !reflect.DeepEqual(body.Tools, wantTools) {
		t.Errorf("tools %+v", body.Tools)
	}
}

// TestOpenAICompatibleServers covers what self-hosted servers send differently.
func TestOpenAICompatibleServers(t *testing.T) {
	tests := []struct {
		name   string
		frames []string
		stop   string
		calls  []string
		text   string
	}{
		{
			name: "tool call without index, finish stop",
			frames: []string{
				ochunk(`[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"id":"call_x","type":"function","function":{"name":"list_items","arguments":"{}"}},{"id":"call_y","type":"function","function":{"name":"create_item","arguments":"{\"title\":\"a\"}"}}]},"finish_reason":null}]`),
				oFinish("stop"), oDone,
			},
			stop:  StopToolUse,
			calls: []string{`call_x list_items {}`, `call_y create_item {"title":"a"}`},
		},
		{
			name:   "length, null choices usage, no usage",
			frames: []string{oContent("abc"), oFinish("length"), "data: {\"choices\":null,\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n", oDone},
			stop:   StopMaxTokens, text: "abc",
		},
		{
			name:   "other finish reason, crlf",
			frames: []string{strings.ReplaceAll(oContent("x")+oFinish("content_filter")+oDone, "\n", "\r\n")},
			stop:   "content_filter", text: "x",
		},
		{
			name:   "missing id gets one",
			frames: []string{ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"list_items","arguments":""}}]},"finish_reason":"tool_calls"}]`), oDone},
			stop:   StopToolUse, calls: []string{"call_0 list_items {}"},
		},
		{
			name:   "other choices ignored",
			frames: []string{ochunk(`[{"index":1,"delta":{"content":"no"},"finish_reason":null},{"index":0,"delta":{"content":"yes"},"finish_reason":"stop"}]`), oDone},
			stop:   StopEndTurn, text: "yes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, sse(tt.frames...))
			deltas, resp, err := collect(context.Background(), newTestOpenAI(t, f, nil), &Request{Messages: []Message{userText("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, d := range deltas {
				if d.Type == DeltaToolCall {
					calls = append(calls, d.ToolUseID+" "+d.Name+" "+string(d.Input))
				}
			}
			if resp.StopReason != tt.stop || textOfDeltas(deltas) != tt.text || !reflect.DeepEqual(calls, tt.calls) {
				t.Fatalf("stop %q text %q calls %q", resp.StopReason, textOfDeltas(deltas), calls)
			}
		})
	}
}

func TestOpenAIMalformed(t *testing.T) {
	tests := map[string][]string{
		"garbage json":     {oRole, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}\n\n"},
		"truncated":        {oRole, oContent("Hel")},
		"no done":          {oContent("Hello"), oFinish("stop"), oUsage},
		"bad arguments":    {ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":"tool_calls"}]`), oDone},
		"huge index":       {ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":100000,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]`), oDone},
		"call has no name": {ochunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]},"finish_reason":null}]`), oDone},
	}
	for name, frames := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t, sse(frames...))
			_, _, err := collect(context.Background(), newTestOpenAI(t, f, nil), &Request{Messages: []Message{userText("hi")}})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if n := len(f.requests()); n != 1 {
				t.Fatalf("%d requests", n)
			}
		})
	}
}

func TestOpenAIErrorBodies(t *testing.T) {
	tests := []struct {
		name, body, typ, msg string
	}{
		{"openai", oErrorBody("invalid_request_error", "Incorrect API key provided: "+openaiKey), "invalid_request_error", "Incorrect API key provided: [redacted]"},
		{"vllm flat", `{"object":"error","message":"model not found","type":"NotFoundError","param":null,"code":404}`, "NotFoundError", "model not found"},
		{"string error", `{"error":"model 'x' not found"}`, "", "model 'x' not found"},
		{"not json", `<html>bad gateway</html>`, "", "Bad Request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, status(400, tt.body))
			_, _, err := collect(context.Background(), newTestOpenAI(t, f, nil), &Request{Messages: []Message{userText("hi")}})
			var pe *Error
			if !errors.As(err, &pe) || pe.Status != 400 || pe.Type != tt.typ || pe.Message != tt.msg || pe.Retryable {
				t.Fatalf("err = %#v", err)
			}
			if strings.Contains(err.Error(), openaiKey) {
				t.Fatalf("error leaks the key: %v", err)
			}
		})
	}
}

func TestNewOpenAIOptions(t *testing.T) {
	p, err := NewOpenAI(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.url != "https://api.openai.com/v1/chat/completions" || p.model != DefaultOpenAIModel || p.Name() != "openai" {
		t.Errorf("defaults: %+v", p)
	}
	p, _ = NewOpenAI(&OpenAIOptions{BaseURL: "http://127.0.0.1:11434/v1/"})
	if p.url != "http://127.0.0.1:11434/v1/chat/completions" {
		t.Errorf("url %q", p.url)
	}
	if _, err := NewOpenAI(&OpenAIOptions{BaseURL: "ftp://x"}); err == nil {
		t.Error("ftp base: want an error")
	}
}
