package pgstore

import (
	"io"
	"log/slog"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ballet/gateway/internal/pglisten"
	"github.com/ballet/gateway/planner"
)

// FuzzNotes feeds arbitrary notifications to the receiving side (it must not fail other
// than by logging), and checks that any text survives encoding into payloads and back.
func FuzzNotes(f *testing.F) {
	for _, seed := range []string{
		"\ns {\"session\":\"s\",\"output\":{\"session\":\"s\",\"type\":\"text\",\"text\":\"hi\"}}",
		"\ns {\"session\":\"s\",\"cancel\":true}",
		"\n {\"sync\":\"abc\"}",
		"\n\x1fx 0 2\n{\"sess", "\n\x1fx 1 2\nion\":\"s\"}", "\n\x1fx 5 2\n", "\n\x1fy 0 99999\nA",
		"\nnospace", "\ns [", `{"session":"s"}`, "", "\n",
	} {
		f.Add(seed, "some text")
	}
	f.Fuzz(func(t *testing.T, payload, text string) {
		b := &Bus{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		var got []planner.Note
		cancel := b.Subscribe(nil, func(n planner.Note) { got = append(got, n) })
		defer cancel()
		for range 3 {
			b.receive(&pgconn.Notification{Payload: payload})
		}
		got = nil

		long := text
		for len(long) < 3*pglisten.MaxPayload && len(text) > 0 {
			long += text
		}
		isErr := false
		want := []planner.Note{
			{Session: "s1", Output: &planner.Output{Session: "s1", Type: planner.OutputToolResult, Text: long, IsError: &isErr}},
			{Session: "s1", Output: &planner.Output{Session: "s1", Type: planner.OutputText, Text: text}},
			{Sync: text},
		}
		payloads, err := encodeNotes(want)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range payloads {
			if len(p) > pglisten.MaxPayload {
				t.Fatalf("payload of %d bytes", len(p))
			}
			b.receive(&pgconn.Notification{Payload: p})
		}
		if !utf8.ValidString(text) {
			// JSON replaces invalid UTF-8: only the shape must survive.
			if len(got) == len(want) {
				want[0].Output.Text, want[1].Output.Text, want[2].Sync = got[0].Output.Text, got[1].Output.Text, got[2].Sync
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	})
}
