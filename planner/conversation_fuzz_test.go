package planner

import (
	"encoding/json"
	"testing"

	"github.com/ballet/gateway/planner/provider"
)

// FuzzConversation builds transcripts of any shape and content (as a damaged or interrupted
// store could hold) and checks that the model always gets a well-formed conversation: roles
// alternate, every tool call is answered in the next message, results answer only calls and
// come before text.
func FuzzConversation(f *testing.F) {
	f.Add([]byte("hat"), `"create it"`, `{"text":"ok","tool_calls":[{"id":"t1","name":"create_item","input":{}}]}`, `{"results":[{"tool_use_id":"t1","tool":"create_item","text":"WEB-1"}]}`)
	f.Add([]byte("hahh"), `"x"`, `{"text":"","tool_calls":[{"id":"a","name":"n","input":null},{"id":"b","name":"n"}]}`, `{"results":[{"tool_use_id":"zz"}]}`)
	f.Add([]byte("tatha"), `""`, `{}`, `[1,2]`)
	f.Add([]byte("aaa"), `null`, `{"text":"hi","tool_calls":null}`, `{"results":null}`)
	f.Fuzz(func(t *testing.T, shape []byte, human, assistant, tool string) {
		if len(shape) > 64 {
			shape = shape[:64]
		}
		var msgs []Message
		for i, c := range shape {
			m := Message{Seq: int64(i + 1)}
			switch c % 3 {
			case 0:
				m.Role, m.Content = RoleHuman, json.RawMessage(human)
			case 1:
				m.Role, m.Content = RoleAssistant, json.RawMessage(assistant)
			default:
				m.Role, m.Content = RoleTool, json.RawMessage(tool)
			}
			msgs = append(msgs, m)
		}
		conv := conversation(msgs)
		for i, m := range conv {
			if len(m.Content) == 0 {
				t.Fatalf("message %d is empty", i)
			}
			if i > 0 && conv[i-1].Role == m.Role {
				t.Fatalf("messages %d and %d have the same role", i-1, i)
			}
			calls := map[string]bool{}
			if i > 0 && conv[i-1].Role == provider.RoleAssistant {
				for _, b := range conv[i-1].Content {
					if b.Type == provider.BlockToolUse {
						calls[b.ToolUseID] = true
					}
				}
			}
			if m.Role == provider.RoleAssistant {
				for _, b := range m.Content {
					if b.Type == provider.BlockToolResult {
						t.Fatalf("a tool result in assistant message %d", i)
					}
				}
				continue
			}
			answered := map[string]bool{}
			seenText := false
			for _, b := range m.Content {
				switch b.Type {
				case provider.BlockToolUse:
					t.Fatalf("a tool call in user message %d", i)
				case provider.BlockToolResult:
					if seenText {
						t.Fatalf("user message %d: a tool result after text", i)
					}
					if !calls[b.ToolUseID] {
						t.Fatalf("user message %d answers %q, which the call before did not make", i, b.ToolUseID)
					}
					answered[b.ToolUseID] = true
				default:
					seenText = true
				}
			}
			for id := range calls {
				if !answered[id] {
					t.Fatalf("user message %d leaves call %q unanswered", i, id)
				}
			}
		}
		if n := len(conv); n > 0 && conv[n-1].Role == provider.RoleAssistant {
			for _, b := range conv[n-1].Content {
				if b.Type == provider.BlockToolUse {
					t.Fatal("the conversation ends with an unanswered tool call")
				}
			}
		}
	})
}
