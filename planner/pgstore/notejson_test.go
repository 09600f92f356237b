package pgstore

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ballet/gateway/planner"
)

// FuzzNoteJSON checks the fast decoder against encoding/json: whatever it accepts,
// json.Unmarshal accepts too and decodes to the same note.
func FuzzNoteJSON(f *testing.F) {
	isErr := true
	for _, n := range []planner.Note{
		{Session: "s", Output: &planner.Output{Session: "s", Turn: "t1", Offset: 3, Type: planner.OutputText, Text: "hi \"there\"\n<b>ż\u2028"}},
		{Session: "s", Output: &planner.Output{Session: "s", Turn: "t1", Offset: 4, Type: planner.OutputToolResult, Text: "{}", IsError: &isErr}},
		{Session: "s", Output: &planner.Output{Session: "s", Type: planner.OutputToolCall, Tool: "list", ToolUseID: "tu_1", Input: []byte(`{"a":1}`)}},
		{Session: "s", Output: &planner.Output{Session: "s", Type: planner.OutputMessage, Seq: 9223372036854775807}},
		{Session: "s", Cancel: true},
		{Sync: "abc"},
	} {
		data, err := json.Marshal(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	for _, s := range []string{
		`{"session":"s","output":{"offset":-0,"seq":-9223372036854775808}}`,
		`{"session":"s","output":{"offset":01}}`, `{"session":"s","output":{"offset":1e3}}`,
		`{"session":"s","output":{"text":"\ud83d\ude00 \u00e9 \/"}}`, `{"session":"s","Session":"t"}`,
		`{"session":"s","session":"t"}`, `{"cancel":false} `, `{"output":null}`, `{"output":{}}`,
		"{\"sync\":\"\xff\"}", `{"sync":"a\tb"}`, `{}`, `{`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		fast, ok := fastNote(data)
		var slow planner.Note
		err := json.Unmarshal([]byte(data), &slow)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("fast decoder accepted %q, encoding/json refused it: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fast %+v (%+v), encoding/json %+v (%+v)", data, fast, fast.Output, slow, slow.Output)
		}
	})
}

// TestNoteJSONFast checks that the notes a replica publishes take the fast path.
func TestNoteJSONFast(t *testing.T) {
	isErr := false
	for _, n := range []planner.Note{
		{Session: "s", Output: &planner.Output{Session: "s", Turn: "t1", Offset: 3, Type: planner.OutputText, Text: "a \"b\"\n<c>"}},
		{Session: "s", Output: &planner.Output{Session: "s", Turn: "t1", Offset: 4, Type: planner.OutputToolResult, Text: "x", IsError: &isErr}},
		{Session: "s", Cancel: true},
		{Sync: "abc"},
	} {
		data, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := fastNote(string(data))
		if !ok || !reflect.DeepEqual(got, n) {
			t.Errorf("%s: fast path %v, %+v", data, ok, got)
		}
	}
}

// TestReceiveSkipsUnwanted checks that want is told which notes carry an output, and that a
// note it refuses is not decoded: a malformed output nobody wants is not even noticed.
func TestReceiveSkipsUnwanted(t *testing.T) {
	var logged bytes.Buffer
	b := &Bus{logger: slog.New(slog.NewTextHandler(&logged, nil))}
	var asked []bool
	var got []planner.Note
	cancel := b.Subscribe(func(_ string, output bool) bool {
		asked = append(asked, output)
		return !output
	}, func(n planner.Note) { got = append(got, n) })
	defer cancel()
	payloads, err := encodeNotes([]planner.Note{
		{Session: "s1", Output: &planner.Output{Session: "s1", Type: planner.OutputText, Text: "x"}},
		{Session: "s1", Cancel: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	payloads = append(payloads, "\ns1 "+`{"session":"s1","output":{"offset":"not a number"}}`)
	for _, p := range payloads {
		b.receive(&pgconn.Notification{Payload: p})
	}
	if !reflect.DeepEqual(asked, []bool{true, false, true}) {
		t.Errorf("want asked with output %v", asked)
	}
	if !reflect.DeepEqual(got, []planner.Note{{Session: "s1", Cancel: true}}) {
		t.Errorf("got %+v", got)
	}
	if logged.Len() > 0 {
		t.Errorf("an unwanted note was decoded: %s", logged.String())
	}
}
