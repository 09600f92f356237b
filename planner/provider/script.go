package provider

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrInvalidScript reports a script that does not follow the format in the package doc.
var ErrInvalidScript = errors.New("provider: invalid script")

// DefaultChunk is the longest text piece, in characters, the scripted provider streams at once.
const DefaultChunk = 8

// Script drives the scripted provider. See the package documentation for its JSON form.
type Script struct {
	Chunk        int    `json:"chunk,omitempty"`          // characters per text delta; DefaultChunk when 0
	ChunkPauseMS int    `json:"chunk_pause_ms,omitempty"` // pause between text pieces
	Rules        []Rule `json:"rules"`
}

// Rule answers the turns whose last human message contains Match.
type Rule struct {
	Match string  `json:"match,omitempty"` // case-insensitive substring; "" matches everything
	Steps []Round `json:"steps"`           // round i answers the i-th model call of the turn
	Final string  `json:"final,omitempty"` // text of the closing round once Steps are used up
}

// Round is one model call: its actions in order and the stop reason to report
// ("tool_use" when it calls a tool, else "end_turn", unless set).
type Round struct {
	Actions    []Action `json:"actions"`
	StopReason string   `json:"stop_reason,omitempty"`
}

// Action is one thing a round does; exactly one of Text, PauseMS, Tool or Error is set.
type Action struct {
	Text    string          `json:"text,omitempty"`     // streamed in pieces
	Chunk   int             `json:"chunk,omitempty"`    // overrides Script.Chunk for this text
	PauseMS int             `json:"pause_ms,omitempty"` // wait, honouring cancellation
	Tool    string          `json:"tool,omitempty"`     // a tool_use block calling this tool
	Input   json.RawMessage `json:"input,omitempty"`    // the tool's input object; {} when absent
	Error   string          `json:"error,omitempty"`    // fail the call with this message
}

// UnmarshalJSON accepts a bare list of rules or {"chunk", "chunk_pause_ms", "rules"}.
func (s *Script) UnmarshalJSON(data []byte) error {
	type plain Script
	var p plain
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		if err := strictUnmarshal(t, &p.Rules); err != nil {
			return err
		}
	} else if err := strictUnmarshal(data, &p); err != nil {
		return err
	}
	*s = Script(p)
	return nil
}

// UnmarshalJSON accepts a bare list of actions or {"actions", "stop_reason"}.
func (r *Round) UnmarshalJSON(data []byte) error {
	type plain Round
	var p plain
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		if err := strictUnmarshal(t, &p.Actions); err != nil {
			return err
		}
	} else if err := strictUnmarshal(data, &p); err != nil {
		return err
	}
	*r = Round(p)
	return nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// ParseScript reads and validates a script.
func ParseScript(r io.Reader) (*Script, error) {
	data, err := io.ReadAll(io.LimitReader(r, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidScript, err)
	}
	var s Script
	if err := strictUnmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidScript, err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadScript reads and validates the script file at path.
func LoadScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("provider: load script: %w", err)
	}
	defer f.Close()
	s, err := ParseScript(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (s *Script) validate() error {
	bad := func(where, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidScript, where, fmt.Sprintf(format, args...))
	}
	if s.Chunk < 0 || s.ChunkPauseMS < 0 {
		return bad("script", "chunk and chunk_pause_ms must not be negative")
	}
	for i, rule := range s.Rules {
		for j, round := range rule.Steps {
			for k, a := range round.Actions {
				where := fmt.Sprintf("rule %d step %d action %d", i, j, k)
				kinds := 0
				for _, set := range []bool{a.Text != "", a.PauseMS != 0, a.Tool != "", a.Error != ""} {
					if set {
						kinds++
					}
				}
				if kinds != 1 {
					return bad(where, "want exactly one of a non-empty text, pause_ms, tool or error")
				}
				if a.PauseMS < 0 || a.Chunk < 0 {
					return bad(where, "pause_ms and chunk must not be negative")
				}
				if a.Chunk != 0 && a.Text == "" {
					return bad(where, "chunk applies to text only")
				}
				if len(a.Input) > 0 {
					if a.Tool == "" {
						return bad(where, "input applies to tool only")
					}
					if _, err := objectOrEmpty(a.Input); err != nil {
						return bad(where, "input: %v", err)
					}
				}
			}
		}
	}
	return nil
}

//go:embed default_script.json
var defaultScriptJSON []byte

// DefaultScript is the script `ballet-gateway dev` runs: it greets; asked to "create"
// or "add" something it calls create_item with a title taken from the message and
// reports the result; asked to "list" it calls list_items.
func DefaultScript() *Script {
	s, err := ParseScript(bytes.NewReader(defaultScriptJSON))
	if err != nil {
		panic("provider: default script: " + err.Error())
	}
	return s
}
