package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// defaultFinal closes a turn whose rules have no round left and no Final text.
const defaultFinal = "Done."

// Scripted is a deterministic provider that plays a Script; it needs no network.
type Scripted struct {
	script *Script
}

var _ Provider = (*Scripted)(nil)

// NewScripted returns a provider playing script, or DefaultScript when script is nil.
// Scripts should come from ParseScript or LoadScript, which validate them; actions
// that set nothing are skipped. A script's zero Chunk is DefaultChunk, filled in here on a
// copy: the caller's script is left as it is.
func NewScripted(script *Script) *Scripted {
	if script == nil {
		script = DefaultScript()
	}
	if script.Chunk <= 0 {
		withChunk := *script
		withChunk.Chunk = DefaultChunk
		script = &withChunk
	}
	return &Scripted{script: script}
}

// Name returns "scripted".
func (s *Scripted) Name() string { return "scripted" }

// Model returns "script": the rules play the model.
func (s *Scripted) Model() string { return "script" }

// Stream implements Provider: it picks the round for req, then plays its actions.
func (s *Scripted) Stream(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	if onDelta == nil {
		onDelta = noDeltas
	}
	human, index := turnPosition(req.Messages)
	round := s.pick(human, index)
	vars := strings.NewReplacer(
		"{{message}}", human,
		"{{title}}", extractTitle(human),
		"{{result}}", lastToolResult(req.Messages),
	)
	nextID := countToolUses(req.Messages)

	resp := &Response{}
	var text strings.Builder // the text block being built
	flush := func() {
		if text.Len() > 0 {
			resp.Content = append(resp.Content, Block{Type: BlockText, Text: text.String()})
			text.Reset()
		}
	}
	output, calls := 0, 0
	for _, a := range round.Actions {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("scripted: %w", err)
		}
		switch {
		case a.Text != "":
			chunk := a.Chunk
			if chunk <= 0 {
				chunk = s.script.Chunk
			}
			pieces := splitRunes(vars.Replace(a.Text), chunk)
			for i, p := range pieces {
				if i > 0 && s.script.ChunkPauseMS > 0 {
					if err := sleepCtx(ctx, time.Duration(s.script.ChunkPauseMS)*time.Millisecond); err != nil {
						return nil, fmt.Errorf("scripted: %w", err)
					}
				}
				text.WriteString(p)
				output += len(p)
				if err := onDelta(Delta{Type: DeltaText, Text: p}); err != nil {
					return nil, err
				}
			}
		case a.PauseMS > 0:
			if err := sleepCtx(ctx, time.Duration(a.PauseMS)*time.Millisecond); err != nil {
				return nil, fmt.Errorf("scripted: %w", err)
			}
		case a.Tool != "":
			input, err := expandInput(a.Input, vars)
			if err != nil {
				return nil, fmt.Errorf("scripted: tool %q input: %w", a.Tool, err)
			}
			nextID++
			calls++
			id := fmt.Sprintf("toolu_scripted_%d", nextID)
			flush()
			resp.Content = append(resp.Content, Block{Type: BlockToolUse, ToolUseID: id, Name: a.Tool, Input: input})
			output += len(a.Tool) + len(input)
			if err := onDelta(Delta{Type: DeltaToolCall, ToolUseID: id, Name: a.Tool, Input: input}); err != nil {
				return nil, err
			}
		case a.Error != "":
			return nil, &Error{Provider: "scripted", Type: "api_error", Message: vars.Replace(a.Error)}
		}
	}
	flush()
	resp.StopReason = round.StopReason
	if resp.StopReason == "" {
		resp.StopReason = StopEndTurn
		if calls > 0 {
			resp.StopReason = StopToolUse
		}
	}
	resp.Usage = Usage{InputTokens: approxTokens(requestSize(req)), OutputTokens: approxTokens(output)}
	return resp, nil
}

// pick returns the round to play: the first rule that matches human and has a round
// index, else a closing text round from the first matching rule's Final.
func (s *Scripted) pick(human string, index int) Round {
	final, matched := defaultFinal, false
	lower := strings.ToLower(human)
	for _, r := range s.script.Rules {
		if !strings.Contains(lower, strings.ToLower(r.Match)) {
			continue
		}
		if !matched {
			matched = true
			if r.Final != "" {
				final = r.Final
			}
		}
		if index < len(r.Steps) {
			return r.Steps[index]
		}
	}
	return Round{Actions: []Action{{Text: final}}, StopReason: StopEndTurn}
}

// turnPosition returns the last human text message and how many model calls were
// answered since it (the round index of this call).
func turnPosition(msgs []Message) (string, int) {
	last := -1
	for i, m := range msgs {
		if m.Role == RoleUser && textOf(m) != "" {
			last = i
		}
	}
	human := ""
	if last >= 0 {
		human = textOf(msgs[last])
	}
	round := 0
	for _, m := range msgs[last+1:] {
		if m.Role == RoleAssistant {
			round++
		}
	}
	return human, round
}

func textOf(m Message) string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == BlockText && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// lastToolResult joins the tool results of the last message, if it carries any.
func lastToolResult(msgs []Message) string {
	if len(msgs) == 0 {
		return ""
	}
	var parts []string
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == BlockToolResult {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func countToolUses(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == BlockToolUse {
				n++
			}
		}
	}
	return n
}

func requestSize(req *Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		for _, b := range m.Content {
			n += len(b.Text) + len(b.Input)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	return n
}

// approxTokens estimates tokens at four bytes each, as a stand-in for real counts.
func approxTokens(bytes int) int { return (bytes + 3) / 4 }

// splitRunes cuts s into pieces of at most n characters, never inside a character.
func splitRunes(s string, n int) []string {
	var out []string
	for s != "" {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// expandInput substitutes the template variables in every string of a tool input.
func expandInput(raw json.RawMessage, vars *strings.Replacer) (json.RawMessage, error) {
	obj, err := objectOrEmpty(raw)
	if err != nil {
		return nil, err
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(obj)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	out, err := json.Marshal(expandValue(v, vars))
	return json.RawMessage(out), err
}

func expandValue(v any, vars *strings.Replacer) any {
	switch x := v.(type) {
	case string:
		return vars.Replace(x)
	case map[string]any:
		for k, e := range x {
			x[k] = expandValue(e, vars)
		}
	case []any:
		for i, e := range x {
			x[i] = expandValue(e, vars)
		}
	}
	return v
}

var (
	createVerb  = regexp.MustCompile(`(?i)\b(create|add)\b`)
	quotedTitle = regexp.MustCompile("\"([^\"]+)\"|“([^”]+)”|`([^`]+)`")
	fillerWords = map[string]bool{
		"a": true, "an": true, "the": true, "new": true, "item": true, "issue": true,
		"task": true, "ticket": true, "card": true, "called": true, "named": true,
		"titled": true, "title": true, "with": true, "for": true, "to": true, "me": true,
		"please": true,
	}
)

// maxTitle bounds a title taken from a message, in characters.
const maxTitle = 200

// extractTitle takes an item title from a request such as `create an item called Fix
// login` or `add "Write docs"`: quoted text wins, else the words after the verb
// without leading filler words.
func extractTitle(msg string) string {
	title := ""
	if m := quotedTitle.FindStringSubmatch(msg); m != nil {
		title = m[1] + m[2] + m[3]
	} else {
		rest := msg
		if loc := createVerb.FindStringIndex(msg); loc != nil {
			rest = msg[loc[1]:]
		}
		words := strings.Fields(rest)
		for len(words) > 0 && fillerWords[strings.ToLower(strings.Trim(words[0], ":-,"))] {
			words = words[1:]
		}
		title = strings.Join(words, " ")
	}
	title = strings.TrimSpace(strings.Trim(strings.TrimSpace(title), ".!?:,;-"))
	if utf8.RuneCountInString(title) > maxTitle {
		title = string([]rune(title)[:maxTitle])
	}
	if title == "" {
		return "Untitled item"
	}
	return title
}
