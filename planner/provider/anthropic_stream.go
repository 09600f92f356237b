package provider

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ballet/gateway/internal/jsonscan"
)

// Bounds on one decoded response, so a hostile or broken server cannot grow memory
// without limit.
const (
	maxBlocks        = 256
	maxResponseBytes = 16 << 20
)

// anthropicDecoder turns Messages API stream events into deltas and a Response.
type anthropicDecoder struct {
	noFast  bool // every event through encoding/json (for the tests)
	started bool
	done    bool
	emitted bool
	size    int
	blocks  map[int]*anthropicBlockState
	order   []int
	resp    Response
}

type anthropicBlockState struct {
	typ     string
	text    strings.Builder
	id      string
	name    string
	initial json.RawMessage
	partial strings.Builder
	input   json.RawMessage
	stopped bool
}

func newAnthropicDecoder() *anthropicDecoder {
	return &anthropicDecoder{blocks: map[int]*anthropicBlockState{}}
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	Index        *int `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type anthropicUsage struct {
	InputTokens  *int `json:"input_tokens"`
	OutputTokens *int `json:"output_tokens"`
}

// event handles one SSE event. name is the SSE event field; the JSON "type" decides,
// since the API names both the same.
func (d *anthropicDecoder) event(name string, data []byte, emit func(Delta) error) error {
	if d.done {
		return nil
	}
	d.size += len(data)
	if d.size > maxResponseBytes {
		return fmt.Errorf("anthropic: %w", malformed("response larger than %d bytes", maxResponseBytes))
	}
	if index, text, ok := fastTextDelta(data); ok && !d.noFast {
		bad := badEvent("content_block_delta")
		if !d.started {
			return bad("before message_start")
		}
		b, err := d.open(&index)
		if err != nil {
			return bad("%v", err)
		}
		return d.textDelta(b, text, emit, bad)
	}
	var ev anthropicEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("anthropic: %w", malformed("event %q: %v", name, err))
	}
	if ev.Type == "" {
		ev.Type = name
	}
	bad := badEvent(ev.Type)
	switch ev.Type {
	case "ping":
		return nil
	case "error":
		e := &Error{Provider: "anthropic", Type: "api_error"}
		if ev.Error != nil {
			e.Type, e.Message = ev.Error.Type, ev.Error.Message
		}
		switch e.Type {
		case "overloaded_error", "api_error", "rate_limit_error":
			e.Retryable = !d.emitted
		}
		if e.Type == "overloaded_error" {
			e.Status = 529
		}
		return e
	case "message_start":
		if d.started {
			return bad("repeated")
		}
		d.started = true
		if ev.Message != nil {
			d.usage(ev.Message.Usage)
		}
		return nil
	}
	if !d.started {
		return bad("before message_start")
	}
	switch ev.Type {
	case "content_block_start":
		if ev.Index == nil || ev.ContentBlock == nil {
			return bad("missing index or content_block")
		}
		i := *ev.Index
		if _, ok := d.blocks[i]; ok {
			return bad("block %d started twice", i)
		}
		if len(d.order) >= maxBlocks {
			return bad("more than %d blocks", maxBlocks)
		}
		b := &anthropicBlockState{typ: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name, initial: ev.ContentBlock.Input}
		if b.typ == BlockText && ev.ContentBlock.Text != "" {
			b.text.WriteString(ev.ContentBlock.Text)
			if err := d.emit(emit, Delta{Type: DeltaText, Text: ev.ContentBlock.Text}); err != nil {
				return err
			}
		}
		d.blocks[i] = b
		d.order = append(d.order, i)
	case "content_block_delta":
		b, err := d.open(ev.Index)
		if err != nil {
			return bad("%v", err)
		}
		if ev.Delta == nil {
			return bad("missing delta")
		}
		switch ev.Delta.Type {
		case "text_delta":
			return d.textDelta(b, ev.Delta.Text, emit, bad)
		case "input_json_delta":
			if b.typ != BlockToolUse {
				return nil // server tools stream input too; only client tool calls matter here
			}
			b.partial.WriteString(ev.Delta.PartialJSON)
		}
		// thinking_delta, signature_delta, citations_delta and future kinds are not ours.
	case "content_block_stop":
		b, err := d.open(ev.Index)
		if err != nil {
			return bad("%v", err)
		}
		b.stopped = true
		if b.typ != BlockToolUse {
			return nil
		}
		raw := json.RawMessage(b.partial.String())
		if strings.TrimSpace(b.partial.String()) == "" {
			raw = b.initial
		}
		input, err := objectOrEmpty(raw)
		if err != nil {
			return bad("tool_use %q input: %v", b.id, err)
		}
		b.input = input
		return d.emit(emit, Delta{Type: DeltaToolCall, ToolUseID: b.id, Name: b.name, Input: input})
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			d.resp.StopReason = *ev.Delta.StopReason
		}
		d.usage(ev.Usage)
	case "message_stop":
		for _, i := range d.order {
			if b := d.blocks[i]; !b.stopped {
				return bad("block %d never stopped", i)
			}
		}
		d.done = true
	}
	// Unknown event types are ignored, as the API's versioning policy asks.
	return nil
}

// badEvent makes the errors of a malformed event of type typ.
func badEvent(typ string) func(format string, args ...any) error {
	return func(format string, args ...any) error {
		return fmt.Errorf("anthropic: %s: %w", typ, malformed(format, args...))
	}
}

// textDelta adds a text_delta's text to its block b and emits it.
func (d *anthropicDecoder) textDelta(b *anthropicBlockState, text string, emit func(Delta) error, bad func(string, ...any) error) error {
	if b.typ != BlockText {
		return bad("text_delta for a %s block", b.typ)
	}
	if text == "" {
		return nil
	}
	b.text.WriteString(text)
	return d.emit(emit, Delta{Type: DeltaText, Text: text})
}

// fastTextDelta reads the event the stream is mostly made of, a text delta, as the API
// writes it: {"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":…}}
// with nothing else. ok is false for any other event, which encoding/json then decodes; what
// it accepts it reads as encoding/json does.
func fastTextDelta(data []byte) (index int, text string, ok bool) {
	b, ok := jsonscan.Skip(data, `{"type":"content_block_delta","index":`)
	if !ok {
		return 0, "", false
	}
	var n int64
	if n, b, ok = jsonscan.Int(b); !ok || int64(int(n)) != n {
		return 0, "", false
	}
	if b, ok = jsonscan.Skip(b, `,"delta":{"type":"text_delta","text":`); !ok {
		return 0, "", false
	}
	if text, b, ok = jsonscan.String(b); !ok || string(b) != "}}" {
		return 0, "", false
	}
	return int(n), text, true
}

func (d *anthropicDecoder) open(index *int) (*anthropicBlockState, error) {
	if index == nil {
		return nil, fmt.Errorf("missing index")
	}
	b, ok := d.blocks[*index]
	if !ok {
		return nil, fmt.Errorf("unknown block %d", *index)
	}
	if b.stopped {
		return nil, fmt.Errorf("block %d already stopped", *index)
	}
	return b, nil
}

func (d *anthropicDecoder) emit(emit func(Delta) error, delta Delta) error {
	d.emitted = true
	return emit(delta)
}

func (d *anthropicDecoder) usage(u *anthropicUsage) {
	if u == nil {
		return
	}
	if u.InputTokens != nil && *u.InputTokens > 0 {
		d.resp.Usage.InputTokens = *u.InputTokens
	}
	if u.OutputTokens != nil {
		d.resp.Usage.OutputTokens = *u.OutputTokens
	}
}

// response assembles the blocks in index order.
func (d *anthropicDecoder) response() *Response {
	resp := d.resp
	order := slices.Clone(d.order)
	slices.Sort(order)
	for _, i := range order {
		b := d.blocks[i]
		switch b.typ {
		case BlockText:
			if b.text.Len() > 0 {
				resp.Content = append(resp.Content, Block{Type: BlockText, Text: b.text.String()})
			}
		case BlockToolUse:
			resp.Content = append(resp.Content, Block{Type: BlockToolUse, ToolUseID: b.id, Name: b.name, Input: b.input})
		}
	}
	return &resp
}
