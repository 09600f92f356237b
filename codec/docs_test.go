package codec

import (
	"encoding/hex"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the MessagePack examples in docs/protocol.md")

var exampleRE = regexp.MustCompile("(?s)```json\n(.*?)\n```\n\n```msgpack-hex\n(.*?)\n```")

// TestProtocolDocExamples checks that every JSON example in docs/protocol.md
// is followed by its exact MessagePack encoding (hex), so the two columns
// of the document can never disagree. Run with -update-docs to regenerate.
func TestProtocolDocExamples(t *testing.T) {
	const path = "../docs/protocol.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	out := exampleRE.ReplaceAllFunc(doc, func(block []byte) []byte {
		m := exampleRE.FindSubmatch(block)
		js, gotHex := m[1], string(m[2])
		wantHex := hex.EncodeToString(toMsgpackFrame(t, js))
		n++
		if *updateDocs {
			return []byte("```json\n" + string(js) + "\n```\n\n```msgpack-hex\n" + wantHex + "\n```")
		}
		if strings.TrimSpace(gotHex) != wantHex {
			t.Errorf("docs/protocol.md: example %s\nhas MessagePack %s\nwant            %s", js, gotHex, wantHex)
		}
		return block
	})
	if n < 10 {
		t.Fatalf("found only %d examples", n)
	}
	if *updateDocs {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// toMsgpackFrame converts one JSON frame to the MessagePack frame with the
// same meaning.
func toMsgpackFrame(t *testing.T, js []byte) []byte {
	t.Helper()
	var m Message
	if err := JSON.Decode(js, &m); err != nil {
		t.Fatalf("example %s: %v", js, err)
	}
	conv := func(raw []byte) []byte {
		if raw == nil {
			return nil
		}
		b, err := ToMsgpack(raw)
		if err != nil {
			t.Fatalf("example %s: %v", js, err)
		}
		return b
	}
	m.Params, m.Result = conv(m.Params), conv(m.Result)
	if m.Error != nil {
		m.Error.Data = conv(m.Error.Data)
	}
	frame, err := MsgPack.Encode(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}
