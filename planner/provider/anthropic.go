package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Anthropic defaults.
const (
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	DefaultAnthropicModel   = "claude-sonnet-4-5"
	DefaultAnthropicVersion = "2023-06-01"
)

// AnthropicOptions configures NewAnthropic. The zero value of each field means its default.
type AnthropicOptions struct {
	// BaseURL is the API root without /v1; requests go to {BaseURL}/v1/messages.
	// Default DefaultAnthropicBaseURL.
	BaseURL string
	// APIKey is sent as x-api-key. Required.
	APIKey string
	// Model defaults to DefaultAnthropicModel.
	Model string
	// Version is the anthropic-version header. Default DefaultAnthropicVersion.
	Version string
	// HTTPClient defaults to a client without an overall timeout (streams are long).
	HTTPClient *http.Client
	// MaxRetries bounds the retries of a call that failed before any delta was delivered.
	// 0 means DefaultMaxRetries; a negative value disables retries.
	MaxRetries int
	// Sleep waits between retries; tests replace it. Default: a timer that honours ctx.
	Sleep SleepFunc
}

// Anthropic streams from the Anthropic Messages API.
type Anthropic struct {
	core    httpCore
	url     string
	model   string
	version string
}

var _ Provider = (*Anthropic)(nil)

// NewAnthropic returns an Anthropic provider. o may be nil only if no key is needed
// by the server at BaseURL, which the real API always needs.
func NewAnthropic(o *AnthropicOptions) (*Anthropic, error) {
	if o == nil {
		o = &AnthropicOptions{}
	}
	base, err := cleanBaseURL(o.BaseURL, DefaultAnthropicBaseURL)
	if err != nil {
		return nil, fmt.Errorf("provider: anthropic: %w", err)
	}
	if strings.HasSuffix(base, "/v1") {
		return nil, errors.New("provider: anthropic: base URL must not end in /v1 (requests go to {base}/v1/messages)")
	}
	if o.APIKey == "" {
		return nil, errors.New("provider: anthropic: API key is required")
	}
	a := &Anthropic{
		core:    newHTTPCore("anthropic", o.HTTPClient, o.APIKey, o.MaxRetries, o.Sleep),
		url:     base + "/v1/messages",
		model:   o.Model,
		version: o.Version,
	}
	if a.model == "" {
		a.model = DefaultAnthropicModel
	}
	if a.version == "" {
		a.version = DefaultAnthropicVersion
	}
	return a, nil
}

// Name returns "anthropic".
func (a *Anthropic) Name() string { return "anthropic" }

// Model returns the model requests ask for.
func (a *Anthropic) Model() string { return a.model }

// Stream implements Provider.
func (a *Anthropic) Stream(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error) {
	body, err := a.encode(req)
	if err != nil {
		return nil, fmt.Errorf("anthropic: encode request: %w", err)
	}
	h := http.Header{}
	h.Set("x-api-key", a.core.apiKey)
	h.Set("anthropic-version", a.version)
	h.Set("content-type", "application/json")
	h.Set("accept", "text/event-stream")
	return a.core.run(ctx, &call{
		url:       a.url,
		header:    h,
		body:      body,
		decode:    decodeAnthropic,
		errorInfo: anthropicErrorInfo,
	}, onDelta)
}

type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    string             `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools,omitempty"`
	Stream    bool               `json:"stream"`
}

type anthropicMessage struct {
	Role    Role             `json:"role"`
	Content []anthropicBlock `json:"content"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   *string         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func (a *Anthropic) encode(req *Request) ([]byte, error) {
	out := anthropicRequest{
		Model:     a.model,
		MaxTokens: maxTokens(req),
		System:    req.System,
		Messages:  make([]anthropicMessage, 0, len(req.Messages)),
		Stream:    true,
	}
	for i, m := range req.Messages {
		am := anthropicMessage{Role: m.Role, Content: make([]anthropicBlock, 0, len(m.Content))}
		for _, b := range m.Content {
			switch b.Type {
			case BlockText:
				if b.Text == "" {
					continue // the API rejects empty text blocks
				}
				am.Content = append(am.Content, anthropicBlock{Type: BlockText, Text: &b.Text})
			case BlockToolUse:
				input, err := objectOrEmpty(b.Input)
				if err != nil {
					return nil, fmt.Errorf("message %d: tool_use %q input: %w", i, b.ToolUseID, err)
				}
				am.Content = append(am.Content, anthropicBlock{Type: BlockToolUse, ID: b.ToolUseID, Name: b.Name, Input: input})
			case BlockToolResult:
				tr := anthropicBlock{Type: BlockToolResult, ToolUseID: b.ToolUseID, IsError: b.IsError}
				if b.Text != "" {
					tr.Content = &b.Text
				}
				am.Content = append(am.Content, tr)
			default:
				return nil, fmt.Errorf("message %d: unknown block type %q", i, b.Type)
			}
		}
		out.Messages = append(out.Messages, am)
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return nil, err
		}
		out.Tools = append(out.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return json.Marshal(out)
}

func toolSchema(t Tool) (json.RawMessage, error) {
	if len(t.InputSchema) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	s, err := objectOrEmpty(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %q input schema: %w", t.Name, err)
	}
	return s, nil
}

// anthropicErrorInfo reads {"type":"error","error":{"type","message"}}.
func anthropicErrorInfo(body []byte) (string, string) {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	return e.Error.Type, e.Error.Message
}

func decodeAnthropic(body io.Reader, emit func(Delta) error) (*Response, error) {
	return newAnthropicDecoder().decode(body, emit)
}

// decode reads the stream body to its message_stop.
func (d *anthropicDecoder) decode(body io.Reader, emit func(Delta) error) (*Response, error) {
	r := newSSEReader(body)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("anthropic: %w", malformed("stream ended before message_stop"))
		}
		if err != nil {
			return nil, err
		}
		if err := d.event(ev.Event, ev.Data, emit); err != nil {
			return nil, err
		}
		if d.done {
			return d.response(), nil
		}
	}
}

// cleanBaseURL checks that base (or def when empty) is an absolute http(s) URL and
// strips trailing slashes.
func cleanBaseURL(base, def string) (string, error) {
	if base == "" {
		base = def
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("base URL %q: want http(s)://host[:port][/path]", base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("base URL %q: must not have a query or fragment", base)
	}
	return strings.TrimRight(base, "/"), nil
}
