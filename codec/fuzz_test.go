package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func fuzzDecode(t *testing.T, c Codec, data []byte) {
	var m Message
	err := c.Decode(data, &m)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) || (de.Code != CodeParseError && de.Code != CodeInvalidRequest) {
			t.Fatalf("decode error is not a DecodeError: %v", err)
		}
		return
	}
	// A decoded message re-encodes to a frame that decodes to the same message.
	frame, err := c.Encode(nil, &m)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	var again Message
	if err := c.Decode(frame, &again); err != nil {
		t.Fatalf("decode of re-encoded %q: %v", frame, err)
	}
	if again.ID != m.ID || again.HasID != m.HasID || again.Method != m.Method ||
		!bytes.Equal(again.Params, m.Params) || !bytes.Equal(again.Result, m.Result) ||
		(again.Error == nil) != (m.Error == nil) {
		t.Fatalf("round trip changed the message: %+v vs %+v", m, again)
	}
	// Params decode into generic values without panicking.
	if m.Params != nil {
		var v any
		_ = c.Unmarshal(m.Params, &v)
		var s struct {
			Subscription string  `json:"subscription"`
			FromSeq      *int64  `json:"from_seq"`
			Payload      RawJSON `json:"payload"`
		}
		_ = c.Unmarshal(m.Params, &s)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"system.ping","params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"x","data":[1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, JSON, data) })
}

func FuzzDecodeMsgpack(f *testing.F) {
	f.Add([]byte("\x84\xa7jsonrpc\xa32.0\xa2id\x07\xa6method\xabsystem.ping\xa6params\x80"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, MsgPack, data) })
}

// FuzzTranscode checks that any JSON text transcodes to MessagePack with the
// same meaning, or is rejected with an error.
func FuzzTranscode(f *testing.F) {
	f.Add([]byte(`{"from":"backlog","to":"ready","n":[1,2.5,-3,null,true,"x"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mp, err := ToMsgpack(data)
		if err != nil {
			return
		}
		var back RawJSON
		if err := MsgPack.Unmarshal(mp, &back); err != nil {
			t.Fatalf("msgpack of %q does not decode: %v", data, err)
		}
		var a, b any
		if len(data) == 0 {
			data = []byte("null") // an empty RawJSON stands for null
		}
		if json.Unmarshal(data, &a) != nil {
			t.Fatalf("transcoded invalid JSON %q", data)
		}
		if len(back) == 0 {
			back = RawJSON("null")
		}
		if err := json.Unmarshal(back, &b); err != nil {
			t.Fatalf("back %q: %v", back, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %#v vs %#v", a, b)
		}
	})
}
