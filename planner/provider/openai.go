package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// OpenAI defaults.
const (
	DefaultOpenAIBaseURL = "https://api.openai.com/v1"
	DefaultOpenAIModel   = "gpt-4o-mini"
)

// OpenAIOptions configures NewOpenAI. The zero value of each field means its default.
type OpenAIOptions struct {
	// BaseURL is the API root including its version; requests go to {BaseURL}/chat/completions,
	// so self-hosted servers work with e.g. "http://host:8000/v1". Default DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer" when set; optional for self-hosted servers.
	APIKey string
	// Model defaults to DefaultOpenAIModel.
	Model string
	// HTTPClient defaults to a client without an overall timeout (streams are long).
	HTTPClient *http.Client
	// MaxRetries bounds the retries of a call that failed before any delta was delivered.
	// 0 means DefaultMaxRetries; a negative value disables retries.
	MaxRetries int
	// Sleep waits between retries; tests replace it. Default: a timer that honours ctx.
	Sleep SleepFunc
}

// OpenAI streams from an OpenAI-compatible Chat Completions endpoint.
type OpenAI struct {
	core  httpCore
	url   string
	model string
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI provider; o may be nil for all defaults.
func NewOpenAI(o *OpenAIOptions) (*OpenAI, error) {
	if o == nil {
		o = &OpenAIOptions{}
	}
	base, err := cleanBaseURL(o.BaseURL, DefaultOpenAIBaseURL)
	if err != nil {
		return nil, fmt.Errorf("provider: openai: %w", err)
	}
	p := &OpenAI{
		core:  newHTTPCore("openai", o.HTTPClient, o.APIKey, o.MaxRetries, o.Sleep),
		url:   base + "/chat/completions",
		model: o.Model,
	}
	if p.model == "" {
		p.model = DefaultOpenAIModel
	}
	return p, nil
}

// Name returns "openai".
func (p *OpenAI) Name() string { return "openai" }

// Model returns the model requests ask for.
func (p *OpenAI) Model() string { return p.model }

// Stream implements Provider.
func (p *OpenAI) Stream(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error) {
	body, err := p.encode(req)
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	h := http.Header{}
	if p.core.apiKey != "" {
		h.Set("Authorization", "Bearer "+p.core.apiKey)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	return p.core.run(ctx, &call{
		url:       p.url,
		header:    h,
		body:      body,
		decode:    decodeOpenAI,
		errorInfo: openaiErrorInfo,
	}, onDelta)
}

type openaiRequest struct {
	Model         string          `json:"model"`
	Messages      []openaiMessage `json:"messages"`
	Tools         []openaiTool    `json:"tools,omitempty"`
	Stream        bool            `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens int `json:"max_tokens"`
}

type openaiMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"`
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// encode maps the Anthropic-shaped conversation onto Chat Completions: the system
// prompt becomes the first message, an assistant's tool_use blocks become tool_calls,
// and a user message's tool_result blocks become "tool" messages placed before its text.
func (p *OpenAI) encode(req *Request) ([]byte, error) {
	out := openaiRequest{Model: p.model, Stream: true, MaxTokens: maxTokens(req)}
	out.StreamOptions.IncludeUsage = true
	if req.System != "" {
		out.Messages = append(out.Messages, openaiMessage{Role: "system", Content: &req.System})
	}
	for i, m := range req.Messages {
		var text []string
		var calls []openaiToolCall
		for _, b := range m.Content {
			switch b.Type {
			case BlockText:
				if b.Text != "" {
					text = append(text, b.Text)
				}
			case BlockToolUse:
				if m.Role != RoleAssistant {
					return nil, fmt.Errorf("message %d: tool_use in a %s message", i, m.Role)
				}
				input, err := objectOrEmpty(b.Input)
				if err != nil {
					return nil, fmt.Errorf("message %d: tool_use %q input: %w", i, b.ToolUseID, err)
				}
				var c openaiToolCall
				c.ID, c.Type = b.ToolUseID, "function"
				c.Function.Name, c.Function.Arguments = b.Name, string(input)
				calls = append(calls, c)
			case BlockToolResult:
				if m.Role != RoleUser {
					return nil, fmt.Errorf("message %d: tool_result in a %s message", i, m.Role)
				}
				content := b.Text
				if b.IsError {
					content = "Error: " + content
				}
				out.Messages = append(out.Messages, openaiMessage{Role: "tool", Content: &content, ToolCallID: b.ToolUseID})
			default:
				return nil, fmt.Errorf("message %d: unknown block type %q", i, b.Type)
			}
		}
		switch {
		case m.Role == RoleAssistant && (len(text) > 0 || len(calls) > 0):
			msg := openaiMessage{Role: "assistant", ToolCalls: calls}
			if len(text) > 0 {
				s := strings.Join(text, "\n\n")
				msg.Content = &s
			}
			out.Messages = append(out.Messages, msg)
		case m.Role == RoleUser && len(text) > 0:
			s := strings.Join(text, "\n\n")
			out.Messages = append(out.Messages, openaiMessage{Role: "user", Content: &s})
		case m.Role != RoleUser && m.Role != RoleAssistant:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return nil, err
		}
		var ot openaiTool
		ot.Type = "function"
		ot.Function.Name, ot.Function.Description, ot.Function.Parameters = t.Name, t.Description, schema
		out.Tools = append(out.Tools, ot)
	}
	return json.Marshal(out)
}

// openaiErrorInfo reads {"error":{"message","type"}}, and the flat
// {"message","type"} some compatible servers answer with.
func openaiErrorInfo(body []byte) (string, string) {
	var e struct {
		Error json.RawMessage `json:"error"`
		openaiErrorBody
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	var inner openaiErrorBody
	if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
		return inner.Type, inner.Message
	}
	var s string
	if json.Unmarshal(e.Error, &s) == nil && s != "" {
		return "", s
	}
	return e.Type, e.Message
}

type openaiErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

func decodeOpenAI(body io.Reader, emit func(Delta) error) (*Response, error) {
	r := newSSEReader(body)
	d := &openaiDecoder{}
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("openai: %w", malformed("stream ended before [DONE]"))
		}
		if err != nil {
			return nil, err
		}
		if err := d.chunk(ev.Data, emit); err != nil {
			return nil, err
		}
		if d.done {
			return d.response(), nil
		}
	}
}
