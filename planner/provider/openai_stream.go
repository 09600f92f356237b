package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// openaiDecoder turns Chat Completions chunks into deltas and a Response. Only
// choice 0 is read. Tool calls are emitted at [DONE], when their arguments are complete.
type openaiDecoder struct {
	done    bool
	emitted bool
	size    int
	text    strings.Builder
	calls   []*openaiCall
	finish  string
	usage   Usage
}

type openaiCall struct {
	id, name string
	args     strings.Builder
	input    json.RawMessage
}

type openaiChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// chunk handles the data of one SSE event.
func (d *openaiDecoder) chunk(data []byte, emit func(Delta) error) error {
	if d.done {
		return nil
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return d.finishStream(emit)
	}
	d.size += len(data)
	if d.size > maxResponseBytes {
		return fmt.Errorf("openai: %w", malformed("response larger than %d bytes", maxResponseBytes))
	}
	var c openaiChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("openai: %w", malformed("chunk: %v", err))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		typ, msg := openaiErrorInfo(append(append([]byte(`{"error":`), c.Error...), '}'))
		if msg == "" {
			msg = "error in stream"
		}
		e := &Error{Provider: "openai", Type: typ, Message: msg}
		switch typ {
		case "server_error", "overloaded_error", "rate_limit_exceeded", "rate_limit_error":
			e.Retryable = !d.emitted
		}
		return e
	}
	if c.Usage != nil {
		d.usage = Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.Delta.Content != nil && *ch.Delta.Content != "" {
			d.text.WriteString(*ch.Delta.Content)
			d.emitted = true
			if err := emit(Delta{Type: DeltaText, Text: *ch.Delta.Content}); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			call, err := d.call(tc.Index, tc.ID)
			if err != nil {
				return fmt.Errorf("openai: %w", malformed("tool call: %v", err))
			}
			if call.id == "" {
				call.id = tc.ID
			}
			if call.name == "" {
				call.name = tc.Function.Name
			}
			call.args.WriteString(tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			d.finish = *ch.FinishReason
		}
	}
	return nil
}

// call finds the tool call a fragment belongs to. Servers that omit the index send
// a new call with an id and continue the last one without.
func (d *openaiDecoder) call(index *int, id string) (*openaiCall, error) {
	i := len(d.calls) - 1
	switch {
	case index != nil:
		i = *index
	case id != "" || i < 0:
		i = len(d.calls)
	}
	if i < 0 || i >= maxBlocks {
		return nil, fmt.Errorf("index %d out of range", i)
	}
	for len(d.calls) <= i {
		d.calls = append(d.calls, &openaiCall{})
	}
	return d.calls[i], nil
}

func (d *openaiDecoder) finishStream(emit func(Delta) error) error {
	for i, c := range d.calls {
		if c.name == "" {
			return fmt.Errorf("openai: %w", malformed("tool call %d has no name", i))
		}
		if c.id == "" {
			c.id = fmt.Sprintf("call_%d", i)
		}
		input, err := objectOrEmpty(json.RawMessage(c.args.String()))
		if err != nil {
			return fmt.Errorf("openai: %w", malformed("tool call %q arguments: %v", c.id, err))
		}
		c.input = input
	}
	d.done = true
	for _, c := range d.calls {
		d.emitted = true
		if err := emit(Delta{Type: DeltaToolCall, ToolUseID: c.id, Name: c.name, Input: c.input}); err != nil {
			return err
		}
	}
	return nil
}

// stopReason maps finish_reason onto the Anthropic names. Some compatible servers
// report "stop" for a response that calls tools, so calls decide.
func (d *openaiDecoder) stopReason() string {
	switch d.finish {
	case "tool_calls", "function_call":
		return StopToolUse
	case "length":
		return StopMaxTokens
	case "stop", "":
		if len(d.calls) > 0 {
			return StopToolUse
		}
		return StopEndTurn
	}
	return d.finish
}

func (d *openaiDecoder) response() *Response {
	resp := &Response{StopReason: d.stopReason(), Usage: d.usage}
	if d.text.Len() > 0 {
		resp.Content = append(resp.Content, Block{Type: BlockText, Text: d.text.String()})
	}
	for _, c := range d.calls {
		resp.Content = append(resp.Content, Block{Type: BlockToolUse, ToolUseID: c.id, Name: c.name, Input: c.input})
	}
	return resp
}
