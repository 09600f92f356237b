package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

var codecs = []Codec{JSON, MsgPack}

// generic decodes an encoded frame into plain Go values with JSON's number
// model normalised (every number as float64), so both codecs compare equal.
func generic(t *testing.T, c Codec, b []byte) any {
	t.Helper()
	var v any
	if c.Binary() {
		if err := msgpack.Unmarshal(b, &v); err != nil {
			t.Fatalf("msgpack decode %x: %v", b, err)
		}
		js, err := json.Marshal(jsonable(normalizeMsgpack(v)))
		if err != nil {
			t.Fatal(err)
		}
		b = js
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("json decode %s: %v", b, err)
	}
	return v
}

func normalizeMsgpack(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeMsgpack(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeMsgpack(e)
		}
	}
	return v
}

type sample struct {
	Subject string         `json:"subject"`
	Time    int64          `json:"time"`
	Tags    []string       `json:"tags,omitempty"`
	Payload RawJSON        `json:"payload,omitempty"`
	Nested  map[string]int `json:"nested,omitempty"`
}

func TestRoundTripSameMeaning(t *testing.T) {
	params := sample{Subject: "8751", Time: 1790830000000, Tags: []string{"a", "é"},
		Payload: RawJSON(`{"from":"backlog","to":"ready","n":-3,"f":1.5,"ok":true,"x":null,"l":[1,{"a":"b"}]}`),
		Nested:  map[string]int{"k": 9}}
	for _, tc := range []struct {
		name string
		msg  Message
	}{
		{"request", Message{ID: 7, HasID: true, Method: "system.ping"}},
		{"request big id", Message{ID: 1 << 40, HasID: true, Method: "auth"}},
		{"request negative id", Message{ID: -5, HasID: true, Method: "auth"}},
		{"notification", Message{Method: "$/heartbeat"}},
		{"result", Message{ID: 7, HasID: true}},
		{"error", Message{ID: 8, HasID: true, Error: &Error{Code: -32601, Message: "method x not found"}}},
		{"error null id", Message{Error: &Error{Code: -32700, Message: "parse error"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var decoded []any
			for _, c := range codecs {
				m := tc.msg
				raw, err := c.Marshal(params)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case m.Method != "":
					m.Params = raw
				case m.Error != nil:
					m.Error = &Error{Code: m.Error.Code, Message: m.Error.Message, Data: raw}
				default:
					m.Result = raw
				}
				frame, err := c.Encode(nil, &m)
				if err != nil {
					t.Fatal(err)
				}
				var got Message
				if err := c.Decode(frame, &got); err != nil {
					t.Fatalf("%s: decode %q: %v", c.Name(), frame, err)
				}
				if got.ID != m.ID || got.HasID != m.HasID || got.Method != m.Method || (got.Error == nil) != (m.Error == nil) {
					t.Fatalf("%s: got %+v want %+v", c.Name(), got, m)
				}
				var back sample
				body := got.Params
				if got.Result != nil {
					body = got.Result
				}
				if got.Error != nil {
					body = got.Error.Data
					if got.Error.Code != m.Error.Code || got.Error.Message != m.Error.Message {
						t.Fatalf("%s: error %+v", c.Name(), got.Error)
					}
				}
				if err := c.Unmarshal(body, &back); err != nil {
					t.Fatalf("%s: unmarshal: %v", c.Name(), err)
				}
				if back.Subject != params.Subject || back.Time != params.Time || !reflect.DeepEqual(back.Tags, params.Tags) || back.Nested["k"] != 9 {
					t.Fatalf("%s: params %+v", c.Name(), back)
				}
				if !jsonEqual(t, back.Payload, params.Payload) {
					t.Fatalf("%s: payload %s", c.Name(), back.Payload)
				}
				decoded = append(decoded, generic(t, c, frame))
			}
			if !reflect.DeepEqual(decoded[0], decoded[1]) {
				t.Fatalf("codecs differ:\njson:    %#v\nmsgpack: %#v", decoded[0], decoded[1])
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestPayloadIsMapInMsgpack(t *testing.T) {
	b, err := MsgPack.Marshal(map[string]any{"payload": RawJSON(`{"a":1,"b":[true]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := msgpack.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	p, ok := v["payload"].(map[string]any)
	if !ok {
		t.Fatalf("payload is %T, want a map", v["payload"])
	}
	if p["a"] != int8(1) && p["a"] != int64(1) && p["a"] != uint8(1) {
		t.Fatalf("a = %#v", p["a"])
	}
}

func TestDecodeErrors(t *testing.T) {
	type want struct {
		code  int
		hasID bool
		id    int64
	}
	jsonCases := []struct {
		in   string
		want want
	}{
		{``, want{CodeParseError, false, 0}},
		{`{"jsonrpc":"2.0",`, want{CodeParseError, false, 0}},
		{`not json`, want{CodeParseError, false, 0}},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"}]`, want{CodeInvalidRequest, false, 0}},
		{`[]`, want{CodeInvalidRequest, false, 0}},
		{`42`, want{CodeInvalidRequest, false, 0}},
		{`"x"`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"2.0","id":"7","method":"a"}`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"2.0","id":7.5,"method":"a"}`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"2.0","id":7.0,"method":"a"}`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"2.0","id":1e3,"method":"a"}`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"2.0","id":99999999999999999999,"method":"a"}`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"2.0","id":null,"method":"a"}`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"1.0","id":3,"method":"a"}`, want{CodeInvalidRequest, true, 3}},
		{`{"id":3,"method":"a"}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","id":3,"method":5}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","id":3,"method":""}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","id":3,"method":"a","params":"x"}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","id":3,"method":"a","params":1}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","id":3}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","id":3,"result":1,"error":{"code":1,"message":"x"}}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":"x","message":"x"}}`, want{CodeInvalidRequest, true, 3}},
		{`{"jsonrpc":"2.0","params":{}}`, want{CodeInvalidRequest, false, 0}},
		{`{"jsonrpc":"2.0"}`, want{CodeInvalidRequest, false, 0}},
	}
	for _, tc := range jsonCases {
		checkDecodeErr(t, JSON, []byte(tc.in), tc.want.code, tc.want.hasID, tc.want.id)
	}
	mp := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	msgpackCases := []struct {
		in   []byte
		want want
	}{
		{nil, want{CodeParseError, false, 0}},
		{[]byte{0xc1}, want{CodeParseError, false, 0}},
		{[]byte{0x83, 0xa7}, want{CodeParseError, false, 0}},
		{append(mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "a"}), 0x00), want{CodeParseError, false, 0}},
		{mp([]any{map[string]any{"jsonrpc": "2.0", "id": 1, "method": "a"}}), want{CodeInvalidRequest, false, 0}},
		{mp(42), want{CodeInvalidRequest, false, 0}},
		{mp(map[string]any{"jsonrpc": "2.0", "id": "7", "method": "a"}), want{CodeInvalidRequest, false, 0}},
		{mp(map[string]any{"jsonrpc": "2.0", "id": 7.5, "method": "a"}), want{CodeInvalidRequest, false, 0}},
		{mp(map[string]any{"jsonrpc": "2.0", "id": uint64(1 << 63), "method": "a"}), want{CodeInvalidRequest, false, 0}},
		{mp(map[string]any{"jsonrpc": "2.0", "id": nil, "method": "a"}), want{CodeInvalidRequest, false, 0}},
		{mp(map[string]any{"jsonrpc": "1.0", "id": 3, "method": "a"}), want{CodeInvalidRequest, true, 3}},
		{mp(map[string]any{"jsonrpc": "2.0", "id": 3, "method": 5}), want{CodeInvalidRequest, true, 3}},
		{mp(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "a", "params": "x"}), want{CodeInvalidRequest, true, 3}},
		{mp(map[int]any{1: "x"}), want{CodeInvalidRequest, false, 0}},
		{mp(map[string]any{"jsonrpc": "2.0", "id": 3}), want{CodeInvalidRequest, true, 3}},
	}
	for _, tc := range msgpackCases {
		checkDecodeErr(t, MsgPack, tc.in, tc.want.code, tc.want.hasID, tc.want.id)
	}
}

func checkDecodeErr(t *testing.T, c Codec, in []byte, code int, hasID bool, id int64) {
	t.Helper()
	var m Message
	err := c.Decode(in, &m)
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Errorf("%s %q: err = %v, want DecodeError %d", c.Name(), in, err, code)
		return
	}
	if de.Code != code || de.HasID != hasID || de.ID != id {
		t.Errorf("%s %q: got code %d id %v/%d (%s), want %d id %v/%d", c.Name(), in, de.Code, de.HasID, de.ID, de.Msg, code, hasID, id)
	}
}

func TestBatchMessage(t *testing.T) {
	for _, c := range codecs {
		var frame []byte
		if c.Binary() {
			frame, _ = msgpack.Marshal([]any{1})
		} else {
			frame = []byte(` [1]`)
		}
		var m Message
		err := c.Decode(frame, &m)
		var de *DecodeError
		if !errors.As(err, &de) || de.Msg != "batch requests are not supported" {
			t.Fatalf("%s: %v", c.Name(), err)
		}
	}
}

func TestSplice(t *testing.T) {
	type event struct {
		Seq     int64   `json:"seq"`
		Type    string  `json:"type"`
		Key     *string `json:"entity_key"`
		Payload RawJSON `json:"payload"`
	}
	key := "WEB-42"
	ev := event{Seq: 1042, Type: "item.state_changed", Key: &key, Payload: RawJSON(`{"from":"backlog","to":"ready"}`)}
	for _, c := range codecs {
		body, err := c.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"s1", `we"ird\` + "\n", string(bytes.Repeat([]byte("x"), 64))} {
			frame, err := c.Splice(nil, "stream.event", sub, body)
			if err != nil {
				t.Fatal(err)
			}
			var m Message
			if err := c.Decode(frame, &m); err != nil {
				t.Fatalf("%s: %v: %q", c.Name(), err, frame)
			}
			if !m.IsNotification() || m.Method != "stream.event" {
				t.Fatalf("%s: %+v", c.Name(), m)
			}
			var got struct {
				Subscription string `json:"subscription"`
				event
			}
			if err := c.Unmarshal(m.Params, &got); err != nil {
				t.Fatal(err)
			}
			if got.Subscription != sub || got.Seq != 1042 || got.Type != ev.Type || *got.Key != key || !jsonEqual(t, got.Payload, ev.Payload) {
				t.Fatalf("%s: %+v", c.Name(), got)
			}
			// Same meaning as marshalling the whole notification at once.
			whole, _ := c.Marshal(map[string]any{"subscription": sub, "seq": 1042, "type": ev.Type, "entity_key": key, "payload": ev.Payload})
			direct, _ := c.Encode(nil, &Message{Method: "stream.event", Params: whole})
			if !reflect.DeepEqual(generic(t, c, frame), generic(t, c, direct)) {
				t.Fatalf("%s: splice differs from direct encoding", c.Name())
			}
		}
		// Empty object and big maps.
		empty, _ := c.Marshal(map[string]any{})
		if _, err := c.Splice(nil, "m", "s", empty); err != nil {
			t.Fatal(err)
		}
		big := map[string]int{}
		for i := 0; i < 40; i++ {
			big[string(rune('a'+i%26))+string(rune('a'+i/26))] = i
		}
		bb, _ := c.Marshal(big)
		frame, err := c.Splice(nil, "m", "s", bb)
		if err != nil {
			t.Fatal(err)
		}
		var m Message
		if err := c.Decode(frame, &m); err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := c.Unmarshal(m.Params, &back); err != nil || len(back) != 41 {
			t.Fatalf("%s: %v %d", c.Name(), err, len(back))
		}
		if _, err := c.Splice(nil, "m", "s", []byte("[1]")); !errors.Is(err, ErrNotObject) {
			t.Fatalf("%s: want ErrNotObject, got %v", c.Name(), err)
		}
	}
}

func TestJSONStringEscaping(t *testing.T) {
	for _, s := range []string{"plain", "quote\"back\\slash", "ctl\x00\x1f\t\n\r", "uni é ✓ \u2028\u2029", "bad\xffutf8"} {
		got := appendJSONString(nil, s)
		want, _ := json.Marshal(s)
		if !bytes.Equal(got, want) {
			t.Errorf("%q: got %s want %s", s, got, want)
		}
	}
	// The envelopes keep \b and \f as they have always been on the wire.
	if got := appendJSONString(nil, "\b\f"); string(got) != `"\u0008\u000c"` {
		t.Errorf("envelope \\b\\f: got %s", got)
	}
}

// AppendJSONText gives what encoding/json gives once it embeds the text: <, >, & and
// U+2028/9 are its to escape.
func TestJSONTextEscaping(t *testing.T) {
	for _, s := range []string{"plain", "quote\"back\\slash", "ctl\x00\x1f\t\n\r\b\f\x7f", "uni é ✓", "<a&b>\u2028\u2029"} {
		got, err := json.Marshal(RawJSON(AppendJSONText(nil, []byte(s))))
		want, _ := json.Marshal(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%q: got %s (%v) want %s", s, got, err, want)
		}
	}
}

func TestDeepNestingRejected(t *testing.T) {
	deep := bytes.Repeat([]byte{0x91}, 5000)
	deep = append(deep, 0xc0)
	if validMsgpack(deep) {
		t.Fatal("deep nesting accepted")
	}
	frame := append([]byte{0x84, 0xa7}, "jsonrpc"...)
	frame = append(frame, 0xa3, '2', '.', '0', 0xa2, 'i', 'd', 0x01, 0xa6)
	frame = append(frame, "method"...)
	frame = append(frame, 0xa1, 'a', 0xa6)
	frame = append(frame, "params"...)
	frame = append(frame, deep...)
	var m Message
	var de *DecodeError
	if err := MsgPack.Decode(frame, &m); !errors.As(err, &de) || de.Code != CodeParseError {
		t.Fatalf("got %v", err)
	}
}

func TestRawJSONTrailingRejected(t *testing.T) {
	if _, err := ToMsgpack([]byte(`{"a":1} {"b":2}`)); err == nil {
		t.Fatal("trailing JSON accepted")
	}
	if _, err := ToMsgpack([]byte(`{"a":`)); err == nil {
		t.Fatal("truncated JSON accepted")
	}
}

func TestIsArray(t *testing.T) {
	for _, c := range codecs {
		for _, tc := range []struct {
			v    any
			want bool
		}{
			{[]any{}, true},
			{[]any{1, "a"}, true},
			{make([]int, 20), true}, // array 16 in MessagePack
			{map[string]any{}, false},
			{map[string]any{"a": []any{1}}, false},
			{"[", false},
			{7, false},
		} {
			raw, err := c.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if got := IsArray(c, raw); got != tc.want {
				t.Errorf("%s %v: IsArray %v", c.Name(), tc.v, got)
			}
		}
	}
	if !IsArray(JSON, []byte(" \n[1]")) || IsArray(JSON, nil) || IsArray(MsgPack, nil) {
		t.Error("IsArray on JSON with leading space, or on nothing")
	}
}

// JSON text is always UTF-8, also when a raw value carries invalid bytes:
// they become U+FFFD, as encoding/json does with Go strings.
func TestJSONMarshalIsUTF8(t *testing.T) {
	for _, v := range []any{
		RawJSON("{\"a\":\"x\xff\xfey\",\"\xfe\":[\"\xc3\"]}"),
		map[string]any{"a": "x\xff\xfey", "\xfe": []string{"\xc3"}},
		json.RawMessage("{\"a\":\"x\xff\xfey\",\"\xfe\":[\"\xc3\"]}"),
	} {
		b, err := JSON.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b) || !json.Valid(b) {
			t.Fatalf("%T: %q is not UTF-8 JSON", v, b)
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil || !strings.HasPrefix(back["a"].(string), "x\uFFFD") {
			t.Fatalf("%T: %q → %v %v", v, b, back, err)
		}
	}
	if b, _ := JSON.Marshal(RawJSON(`{"a":"żółw"}`)); string(b) != `{"a":"żółw"}` {
		t.Fatalf("valid UTF-8 changed: %s", b)
	}
}

// SpliceHead's three parts are Splice's frame, and the middle one is the body's own bytes,
// not a copy: a writer sends it where it is.
func TestSpliceHead(t *testing.T) {
	for _, c := range codecs {
		full, _ := c.Marshal(map[string]any{"seq": 7, "type": "item.created"})
		empty, _ := c.Marshal(map[string]any{})
		for _, body := range [][]byte{full, empty, []byte("{ \n}")} {
			if !c.Binary() && body[0] != '{' || c.Binary() && body[0] == '{' {
				continue
			}
			want, err := c.Splice([]byte("x"), "stream.event", "s1", body)
			if err != nil {
				t.Fatal(err)
			}
			head, rest, tail, err := c.SpliceHead([]byte("x"), "stream.event", "s1", body)
			if err != nil {
				t.Fatal(err)
			}
			got := append(append(append([]byte(nil), head...), rest...), tail...)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: %q, want %q", c.Name(), got, want)
			}
			if len(rest) > 0 {
				own := false
				for i := range body {
					own = own || &body[i] == &rest[0]
				}
				if !own {
					t.Fatalf("%s: rest is not the body's own bytes", c.Name())
				}
			}
		}
		if _, _, _, err := c.SpliceHead(nil, "m", "s", []byte("[1]")); !errors.Is(err, ErrNotObject) {
			t.Fatalf("%s: want ErrNotObject, got %v", c.Name(), err)
		}
	}
}
