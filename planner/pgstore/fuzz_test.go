package pgstore

import (
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ballet/gateway/planner"
)

// FuzzDecodePayload feeds arbitrary notifications to the decoder (it must not fail other
// than with an error), and checks that any text survives encoding into payloads and back.
func FuzzDecodePayload(f *testing.F) {
	for _, seed := range []string{
		`{"session":"s","output":{"session":"s","type":"text","text":"hi"}}`,
		`{"session":"s","cancel":true}`,
		`{"sync":"abc"}`,
		`{"frag":"x","i":0,"n":2,"d":"eyJzZXNz"}`,
		`{"frag":"x","i":1,"n":2,"d":"aW9uIjoicyJ9"}`,
		`{"frag":"x","i":5,"n":2,"d":""}`,
		`{"frag":"y","i":0,"n":99999,"d":"AA=="}`,
		`{"frag":"z","i":0,"n":1,"d":"bm90IGpzb24="}`,
		`[]`, `null`, `"text"`, `{`, ``,
	} {
		f.Add(seed, "some text")
	}
	f.Fuzz(func(t *testing.T, payload, text string) {
		b := &Bus{partial: map[string]*partial{}}
		now := time.Unix(1_800_000_000, 0)
		for i := 0; i < 3; i++ {
			_, _, _ = b.decodePayload(payload, now)
		}
		if len(b.partial) > maxPartial {
			t.Fatalf("%d partial notes", len(b.partial))
		}

		long := text
		for len(long) < 3*maxWhole && len(text) > 0 {
			long += text
		}
		isErr := false
		want := planner.Note{Session: text, Output: &planner.Output{Session: text, Type: planner.OutputToolResult, Text: long, IsError: &isErr}}
		payloads, err := encodeNote(want)
		if err != nil {
			t.Fatal(err)
		}
		var got planner.Note
		complete := false
		for i, p := range payloads {
			if len(p) > maxWhole {
				t.Fatalf("payload of %d bytes", len(p))
			}
			n, ok, err := b.decodePayload(p, now)
			if err != nil {
				t.Fatalf("payload %d: %v", i, err)
			}
			if ok != (i == len(payloads)-1) {
				t.Fatalf("payload %d of %d complete=%v", i, len(payloads), ok)
			}
			got, complete = n, ok
		}
		if !complete {
			t.Fatal("never complete")
		}
		if !utf8.ValidString(text) {
			// JSON replaces invalid UTF-8: only the shape must survive.
			want.Session, want.Output.Session, want.Output.Text = got.Session, got.Output.Session, got.Output.Text
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	})
}
