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

const anthropicKey = "sk-ant-test-SECRET-0123456789"

// aev frames one Anthropic stream event as the API sends it.
func aev(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

var (
	aMessageStart = aev("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`)
	aPing         = aev("ping", `{"type": "ping"}`)
	aMessageStop  = aev("message_stop", `{"type":"message_stop"}`)
	aOverloaded   = aev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
)

func aTextStart(i int) string {
	return aev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
}

func aTextDelta(i int, text string) string {
	t, _ := json.Marshal(text)
	return aev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, t))
}

func aToolStart(i int, id, name string) string {
	return aev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i, id, name))
}

func aJSONDelta(i int, partial string) string {
	p, _ := json.Marshal(partial)
	return aev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, p))
}

func aBlockStop(i int) string {
	return aev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

func aMessageDelta(stop string, out int) string {
	return aev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, out))
}

// aHelloStream is a complete text answer "Hello world".
func aHelloStream() []string {
	return []string{aMessageStart, aTextStart(0), aPing, aTextDelta(0, "Hello"), aTextDelta(0, " world"), aBlockStop(0), aMessageDelta("end_turn", 15), aMessageStop}
}

func aErrorBody(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011"}`, typ, msg)
}

func newTestAnthropic(t *testing.T, f *fakeAPI, o *AnthropicOptions) *Anthropic {
	t.Helper()
	if o == nil {
		o = &AnthropicOptions{}
	}
	o.BaseURL = f.srv.URL
	o.HTTPClient = f.srv.Client()
	if o.APIKey == "" {
		o.APIKey = anthropicKey
	}
	if o.Sleep == nil {
		o.Sleep = (&sleepRecorder{}).sleep
	}
	a, err := NewAnthropic(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAnthropicTextStreaming(t *testing.T) {
	f := newFakeAPI(t, sse(aHelloStream()...))
	a := newTestAnthropic(t, f, &AnthropicOptions{Model: "claude-test", Version: "2099-01-01"})
	deltas, resp, err := collect(context.Background(), a, &Request{System: "You plan.", Messages: []Message{userText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{{Type: DeltaText, Text: "Hello"}, {Type: DeltaText, Text: " world"}}
	if !reflect.DeepEqual(deltas, want) {
		t.Fatalf("deltas %+v, want %+v", deltas, want)
	}
	wantResp := &Response{Content: []Block{{Type: BlockText, Text: "Hello world"}}, StopReason: StopEndTurn, Usage: Usage{InputTokens: 25, OutputTokens: 15}}
	if !reflect.DeepEqual(resp, wantResp) {
		t.Fatalf("response %+v, want %+v", resp, wantResp)
	}

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != "/v1/messages" {
		t.Errorf("request %s %s", r.method, r.path)
	}
	for h, v := range map[string]string{"X-Api-Key": anthropicKey, "Anthropic-Version": "2099-01-01", "Content-Type": "application/json"} {
		if got := r.header.Get(h); got != v {
			t.Errorf("header %s = %q, want %q", h, got, v)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	wantBody := map[string]any{
		"model": "claude-test", "max_tokens": float64(4096), "system": "You plan.", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"}}}},
	}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("body %s", r.body)
	}
}

// TestAnthropicFraming feeds the same answer in the framings SSE allows.
func TestAnthropicFraming(t *testing.T) {
	joined := strings.Join(aHelloStream(), "")
	tests := map[string][]string{
		"crlf":           {strings.ReplaceAll(joined, "\n", "\r\n")},
		"cr":             {strings.ReplaceAll(joined, "\n", "\r")},
		"byte by byte":   strings.Split(joined, ""),
		"comments":       {": keep-alive\n\n" + strings.ReplaceAll(joined, "event: ping\n", ": comment\nevent: ping\n")},
		"no space":       {strings.ReplaceAll(strings.ReplaceAll(joined, "data: ", "data:"), "event: ", "event:")},
		"multiline data": {strings.Replace(joined, `"delta":{"type":"text_delta","text":"Hello"}`, "\"delta\":\ndata: {\"type\":\"text_delta\",\"text\":\"Hello\"}", 1)},
		"unknown events": {strings.Replace(joined, aPing, aev("future_event", `{"type":"future_event","x":1}`)+aPing, 1)},
		"thinking block": {strings.Join([]string{aMessageStart,
			aev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`),
			aev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`),
			aev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`),
			aBlockStop(0), aTextStart(1), aTextDelta(1, "Hello"), aTextDelta(1, " world"), aBlockStop(1), aMessageDelta("end_turn", 15), aMessageStop}, "")},
	}
	for name, frames := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t, sse(frames...))
			deltas, resp, err := collect(context.Background(), newTestAnthropic(t, f, nil), &Request{Messages: []Message{userText("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			if textOfDeltas(deltas) != "Hello world" || len(resp.Content) != 1 || resp.Content[0].Text != "Hello world" {
				t.Fatalf("deltas %+v response %+v", deltas, resp)
			}
		})
	}
}

func TestAnthropicToolUseTwoRounds(t *testing.T) {
	round1 := []string{aMessageStart, aTextStart(0), aTextDelta(0, "Creating it."), aBlockStop(0),
		aToolStart(1, "toolu_01A", "create_item"), aJSONDelta(1, ""), aJSONDelta(1, `{"title": "Fix`), aJSONDelta(1, ` login"}`), aBlockStop(1),
		aToolStart(2, "toolu_01B", "list_items"), aBlockStop(2),
		aMessageDelta("tool_use", 40), aMessageStop}
	round2 := []string{aMessageStart, aTextStart(0), aTextDelta(0, "Done: WEB-7."), aBlockStop(0), aMessageDelta("end_turn", 9), aMessageStop}
	f := newFakeAPI(t, sse(round1...), sse(round2...))
	a := newTestAnthropic(t, f, nil)
	tools := []Tool{
		{Name: "create_item", Description: "Create an item", InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		{Name: "list_items", Description: "List items", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	req := &Request{Messages: []Message{userText("create Fix login")}, Tools: tools, MaxTokens: 1000}

	deltas, resp, err := collect(context.Background(), a, req)
	if err != nil {
		t.Fatal(err)
	}
	wantDeltas := []Delta{
		{Type: DeltaText, Text: "Creating it."},
		{Type: DeltaToolCall, ToolUseID: "toolu_01A", Name: "create_item", Input: json.RawMessage(`{"title":"Fix login"}`)},
		{Type: DeltaToolCall, ToolUseID: "toolu_01B", Name: "list_items", Input: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(deltas, wantDeltas) {
		t.Fatalf("deltas %+v", deltas)
	}
	if resp.StopReason != StopToolUse || len(resp.Content) != 3 || resp.Content[1].ToolUseID != "toolu_01A" || resp.Content[2].Name != "list_items" {
		t.Fatalf("response %+v", resp)
	}

	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, Content: resp.Content},
		Message{Role: RoleUser, Content: []Block{
			{Type: BlockToolResult, ToolUseID: "toolu_01A", Text: "created WEB-7"},
			{Type: BlockToolResult, ToolUseID: "toolu_01B", Text: "permission denied", IsError: true},
		}})
	deltas, resp, err = collect(context.Background(), a, req)
	if err != nil {
		t.Fatal(err)
	}
	if textOfDeltas(deltas) != "Done: WEB-7." || resp.StopReason != StopEndTurn {
		t.Fatalf("round 2: deltas %+v response %+v", deltas, resp)
	}

	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var body struct {
		MaxTokens int `json:"max_tokens"`
		Messages  []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(reqs[1].body, &body); err != nil {
		t.Fatal(err)
	}
	if body.MaxTokens != 1000 || len(body.Messages) != 3 {
		t.Fatalf("body %s", reqs[1].body)
	}
	wantAssistant := []map[string]any{
		{"type": "text", "text": "Creating it."},
		{"type": "tool_use", "id": "toolu_01A", "name": "create_item", "input": map[string]any{"title": "Fix login"}},
		{"type": "tool_use", "id": "toolu_01B", "name": "list_items", "input": map[string]any{}},
	}
	if body.Messages[1].Role != "assistant" || !reflect.DeepEqual(body.Messages[1].Content, wantAssistant) {
		t.Errorf("assistant message %+v", body.Messages[1])
	}
	wantResults := []map[string]any{
		{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "created WEB-7"},
		{"type": "tool_result", "tool_use_id": "toolu_01B", "content": "permission denied", "is_error": true},
	}
	if body.Messages[2].Role != "user" || !reflect.DeepEqual(body.Messages[2].Content, wantResults) {
		t.Errorf("tool results %+v", body.Messages[2])
	}
	wantTools := []map[string]any{
		{"name": "create_item", "description": "Create an item", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}, "required": []any{"title"}}},
		{"name": "list_items", "description": "List items", "input_schema": map[string]any{"type": "object"}},
	}
	if !reflect.DeepEqual(body.Tools, wantTools) {
		t.Errorf("tools %+v", body.Tools)
	}
}

func TestAnthropicMalformed(t *testing.T) {
	tests := map[string][]string{
		"garbage json":         {aMessageStart, aTextStart(0), aev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{`)},
		"truncated":            {aMessageStart, aTextStart(0), aTextDelta(0, "Hel")},
		"half an event":        {aMessageStart, aTextStart(0), "event: content_block_delta\ndata: {\"type\":\"content_block_de"},
		"empty body":           nil,
		"delta before start":   {aMessageStart, aTextDelta(3, "x")},
		"before message_start": {aTextStart(0)},
		"bad tool input":       {aMessageStart, aToolStart(0, "toolu_1", "create_item"), aJSONDelta(0, `{"title": `), aBlockStop(0), aMessageDelta("tool_use", 1), aMessageStop},
		"array tool input":     {aMessageStart, aToolStart(0, "toolu_1", "create_item"), aJSONDelta(0, `[1]`), aBlockStop(0), aMessageDelta("tool_use", 1), aMessageStop},
		"block never stopped":  {aMessageStart, aTextStart(0), aTextDelta(0, "x"), aMessageDelta("end_turn", 1), aMessageStop},
	}
	for name, frames := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t, sse(frames...))
			_, _, err := collect(context.Background(), newTestAnthropic(t, f, nil), &Request{Messages: []Message{userText("hi")}})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if n := len(f.requests()); n != 1 {
				t.Fatalf("%d requests; malformed streams are not retried", n)
			}
		})
	}
}

func TestAnthropicKeyNeverInErrors(t *testing.T) {
	f := newFakeAPI(t, status(401, aErrorBody("authentication_error", "invalid x-api-key "+anthropicKey)))
	_, _, err := collect(context.Background(), newTestAnthropic(t, f, nil), &Request{Messages: []Message{userText("hi")}})
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Type != "authentication_error" || pe.Retryable {
		t.Fatalf("err = %#v", err)
	}
	if strings.Contains(err.Error(), anthropicKey) || strings.Contains(pe.Message, anthropicKey) {
		t.Fatalf("error leaks the key: %v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests; 401 is not retried", n)
	}
}

func TestNewAnthropicOptions(t *testing.T) {
	if _, err := NewAnthropic(nil); err == nil {
		t.Error("no key: want an error")
	}
	if _, err := NewAnthropic(&AnthropicOptions{APIKey: "k", BaseURL: "https://api.anthropic.com/v1"}); err == nil {
		t.Error("base with /v1: want an error")
	}
	if _, err := NewAnthropic(&AnthropicOptions{APIKey: "k", BaseURL: "api.anthropic.com"}); err == nil {
		t.Error("base without scheme: want an error")
	}
	a, err := NewAnthropic(&AnthropicOptions{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if a.url != "https://api.anthropic.com/v1/messages" || a.model != DefaultAnthropicModel || a.version != "2023-06-01" ||
		a.core.maxRetries != 3 || a.Name() != "anthropic" {
		t.Errorf("defaults: %+v", a)
	}
	a, _ = NewAnthropic(&AnthropicOptions{APIKey: "k", BaseURL: "http://proxy:8080/anthropic/", MaxRetries: -1})
	if a.url != "http://proxy:8080/anthropic/v1/messages" || a.core.maxRetries != 0 {
		t.Errorf("url %q retries %d", a.url, a.core.maxRetries)
	}
}
