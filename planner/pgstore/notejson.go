package pgstore

import (
	"encoding/json"

	"github.com/ballet/gateway/internal/jsonscan"
	"github.com/ballet/gateway/planner"
)

// decodeNote decodes a note's JSON: the common notes, as encodeNotes writes them, without
// encoding/json (fastNote), anything else with it.
func decodeNote(data string) (planner.Note, error) {
	if n, ok := fastNote(data); ok {
		return n, nil
	}
	var n planner.Note
	err := json.Unmarshal([]byte(data), &n)
	n.Lost = false
	return n, err
}

// Keys of a note and of its output, as fastNote tells them apart, one bit each.
const (
	keySession = 1 << iota
	keyOutput
	keyCancel
	keySync
	keyTurn
	keyOffset
	keyType
	keyText
	keyTool
	keyToolUseID
	keyIsError
	keySeq
)

// fastNote reads the note's JSON if it is an object of the keys encoding/json writes for
// one (each once, in any order), without spaces, whose output has no input: then it is
// what json.Unmarshal makes of it, and ok is true. Otherwise ok is false.
func fastNote(b string) (n planner.Note, ok bool) {
	rest, ok := jsonscan.Object(b, func(key, b string) (bit int, rest string, ok bool) {
		switch key {
		case "session":
			n.Session, rest, ok = jsonscan.String(b)
			return keySession, rest, ok
		case "sync":
			n.Sync, rest, ok = jsonscan.String(b)
			return keySync, rest, ok
		case "cancel":
			n.Cancel, rest, ok = boolean(b)
			return keyCancel, rest, ok
		case "output":
			n.Output = new(planner.Output)
			rest, ok = fastOutput(b, n.Output)
			return keyOutput, rest, ok
		}
		return 0, b, false
	})
	return n, ok && rest == ""
}

// fastOutput reads an output's JSON object into o, as fastNote reads a note's, and returns
// what follows it.
func fastOutput(b string, o *planner.Output) (rest string, ok bool) {
	strs := [...]struct {
		key string
		bit int
		v   *string
	}{
		{"session", keySession, &o.Session}, {"turn", keyTurn, &o.Turn}, {"type", keyType, &o.Type},
		{"text", keyText, &o.Text}, {"tool", keyTool, &o.Tool}, {"tool_use_id", keyToolUseID, &o.ToolUseID},
	}
	return jsonscan.Object(b, func(key, b string) (bit int, rest string, ok bool) {
		for _, f := range strs {
			if f.key == key {
				*f.v, rest, ok = jsonscan.String(b)
				return f.bit, rest, ok
			}
		}
		switch key {
		case "offset":
			o.Offset, rest, ok = jsonscan.Int(b)
			return keyOffset, rest, ok
		case "seq":
			o.Seq, rest, ok = jsonscan.Int(b)
			return keySeq, rest, ok
		case "is_error":
			var v bool
			v, rest, ok = boolean(b)
			o.IsError = &v
			return keyIsError, rest, ok
		}
		return 0, b, false
	})
}

// boolean reads true or false.
func boolean(b string) (v bool, rest string, ok bool) {
	if rest, ok = jsonscan.Skip(b, "true"); ok {
		return true, rest, true
	}
	rest, ok = jsonscan.Skip(b, "false")
	return false, rest, ok
}
