package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/gateway/planner/provider"
)

// DefaultSystemPrompt is the planner's instructions to the model.
const DefaultSystemPrompt = `You are the planner of Ballet, an issue tracker. You help a person plan their project's work: ` +
	`you read the project's items and, when asked, create items, edit their titles and descriptions, move them between ` +
	`states (backlog, ready, in_progress, done) and record which items block which. Use the tools for every fact about ` +
	`the tracker; never invent item keys. Changes you make are recorded as made by you on the person's behalf, with ` +
	`their permissions. Be brief.`

// SummaryPrompt is the instruction of the model call that summarizes older messages.
const SummaryPrompt = `You summarize a conversation between a person and the planner of an issue tracker, so that the ` +
	`planner can continue it without the original messages. Keep every decision, request, item key, change made and ` +
	`open question; drop pleasantries. Answer with the summary only.`

// summaryRequest opens the summarization request's user message.
const summaryRequest = "Summarize the conversation below.\n\n"

// Bounds of what a summarization request quotes of one message, in bytes.
const maxQuoted = 4000

// prepare builds the next model call of t, summarizing older messages first when the
// context would exceed the budget.
func (s *Service) prepare(ctx context.Context, t *turn, tools *toolbox) (*provider.Request, error) {
	id := t.session.ID
	sum, err := s.store.Summary(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read summary: %w", err)
	}
	var after int64
	if sum != nil {
		after = sum.UpTo
	}
	msgs, err := s.store.Messages(ctx, id, after)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	req := s.request(t, tools, sum, msgs)
	if estimate(req) <= s.budget {
		return req, nil
	}
	cut := s.boundary(t, tools, msgs)
	if cut <= 0 {
		return req, nil // nothing older than the current turn to summarize
	}
	text, err := s.summarize(ctx, t, sum, msgs[:cut])
	if err != nil {
		return nil, err
	}
	next := &Summary{Session: id, UpTo: msgs[cut-1].Seq, Text: text, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := s.store.SaveSummary(ctx, next); err != nil {
		return nil, fmt.Errorf("store summary: %w", err)
	}
	s.emit(ctx, t, Output{Type: OutputCompacted, Seq: next.UpTo})
	return s.request(t, tools, next, msgs[cut:]), nil
}

// boundary returns the index of the message the kept part starts at: the oldest human
// message after which the rest fits in half the budget, else the last human message (the
// current turn's). Kept parts start at a human message, so a tool call is never parted from
// its result. 0 means there is nothing to summarize.
func (s *Service) boundary(t *turn, tools *toolbox, msgs []Message) int {
	last := 0
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Role != RoleHuman {
			continue
		}
		last = i
		if estimate(s.request(t, tools, nil, msgs[i:])) <= s.budget/2 {
			return i
		}
	}
	return last
}

// summarize asks the model to summarize prev and msgs.
func (s *Service) summarize(ctx context.Context, t *turn, prev *Summary, msgs []Message) (string, error) {
	var b strings.Builder
	b.WriteString(summaryRequest)
	if prev != nil {
		b.WriteString("Summary of what came before:\n")
		b.WriteString(prev.Text)
		b.WriteString("\n\n")
	}
	for _, m := range msgs {
		b.WriteString(quote(m))
	}
	req := &provider.Request{
		System:    SummaryPrompt,
		Messages:  []provider.Message{{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: b.String()}}}},
		MaxTokens: s.maxTokens,
	}
	resp, err := s.stream(ctx, t, purposeSummary, req, nil)
	if err != nil {
		return "", fmt.Errorf("summarize: %w", err)
	}
	var out strings.Builder
	for _, blk := range resp.Content {
		if blk.Type == provider.BlockText {
			out.WriteString(blk.Text)
		}
	}
	text := strings.TrimSpace(out.String())
	if text == "" {
		text = "(nothing to summarize)"
	}
	return text, nil
}

// quote renders one message for a summarization request.
func quote(m Message) string {
	cut := func(s string) string {
		if len(s) <= maxQuoted {
			return s
		}
		i := maxQuoted
		for i > 0 && s[i]&0xc0 == 0x80 {
			i--
		}
		return s[:i] + "…"
	}
	var b strings.Builder
	switch m.Role {
	case RoleHuman:
		var text string
		_ = json.Unmarshal(m.Content, &text)
		fmt.Fprintf(&b, "[%d] Person: %s\n", m.Seq, cut(text))
	case RoleAssistant:
		var a AssistantContent
		_ = json.Unmarshal(m.Content, &a)
		if a.Text != "" {
			fmt.Fprintf(&b, "[%d] Planner: %s\n", m.Seq, cut(a.Text))
		}
		for _, c := range a.ToolCalls {
			fmt.Fprintf(&b, "[%d] Planner called %s %s\n", m.Seq, c.Name, cut(string(c.Input)))
		}
	case RoleTool:
		var tc ToolContent
		_ = json.Unmarshal(m.Content, &tc)
		for _, r := range tc.Results {
			status := "returned"
			if r.IsError {
				status = "failed"
			}
			fmt.Fprintf(&b, "[%d] Tool %s %s: %s\n", m.Seq, r.Tool, status, cut(r.Text))
		}
	}
	return b.String()
}

// interrupted is the result the model sees for a tool call that has none recorded.
const interrupted = "no result was recorded: the turn was interrupted"

// request builds a model call from a summary and the messages after it.
func (s *Service) request(t *turn, tools *toolbox, sum *Summary, msgs []Message) *provider.Request {
	var system strings.Builder
	system.WriteString(s.system)
	fmt.Fprintf(&system, "\n\nProject: %s. Item keys look like %s-12. You act for the person with subject %q.", t.session.Project, t.session.Project, t.human)
	if sum != nil {
		fmt.Fprintf(&system, "\n\nThe conversation's first %d messages are summarized here:\n%s", sum.UpTo, sum.Text)
	}
	return &provider.Request{
		System:    system.String(),
		Messages:  conversation(msgs),
		Tools:     tools.defs,
		MaxTokens: s.maxTokens,
	}
}

// conversation turns stored messages into model messages. Every tool call gets a result (a
// tool call whose result was never stored, because its turn was interrupted, gets an error
// result), results without a call are dropped, empty messages are skipped, and consecutive
// messages of one role are merged, tool results first.
func conversation(msgs []Message) []provider.Message {
	var out []provider.Message
	add := func(role provider.Role, blocks ...provider.Block) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, provider.Message{Role: role, Content: blocks})
	}
	var pending []ToolCall // calls of the last assistant message still without a result
	settle := func(answered map[string]ToolResult) {
		var blocks []provider.Block
		for _, c := range pending {
			r, ok := answered[c.ID]
			if !ok {
				r = ToolResult{ToolUseID: c.ID, Tool: c.Name, Text: interrupted, IsError: true}
			}
			blocks = append(blocks, provider.Block{Type: provider.BlockToolResult, ToolUseID: c.ID, Text: r.Text, IsError: r.IsError})
		}
		pending = nil
		add(provider.RoleUser, blocks...)
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleTool:
			var tc ToolContent
			_ = json.Unmarshal(m.Content, &tc)
			answered := map[string]ToolResult{}
			for _, r := range tc.Results {
				answered[r.ToolUseID] = r
			}
			settle(answered)
		case RoleHuman:
			settle(nil)
			var text string
			if json.Unmarshal(m.Content, &text) == nil && text != "" {
				add(provider.RoleUser, provider.Block{Type: provider.BlockText, Text: text})
			}
		case RoleAssistant:
			settle(nil)
			var a AssistantContent
			_ = json.Unmarshal(m.Content, &a)
			var blocks []provider.Block
			if a.Text != "" {
				blocks = append(blocks, provider.Block{Type: provider.BlockText, Text: a.Text})
			}
			for _, c := range a.ToolCalls {
				blocks = append(blocks, provider.Block{Type: provider.BlockToolUse, ToolUseID: c.ID, Name: c.Name, Input: objectJSON(c.Input)})
			}
			add(provider.RoleAssistant, blocks...)
			pending = a.ToolCalls
		}
	}
	settle(nil)
	// Within a user message, tool results come first, as the Messages API requires.
	for i := range out {
		if out[i].Role != provider.RoleUser {
			continue
		}
		var results, rest []provider.Block
		for _, b := range out[i].Content {
			if b.Type == provider.BlockToolResult {
				results = append(results, b)
			} else {
				rest = append(rest, b)
			}
		}
		out[i].Content = append(results, rest...)
	}
	return out
}

// estimate is the size of a request in tokens, taken as bytes/4.
func estimate(req *provider.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += 8
		for _, b := range m.Content {
			n += len(b.Text) + len(b.Input) + len(b.Name) + len(b.ToolUseID) + 16
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	return (n + 3) / 4
}
