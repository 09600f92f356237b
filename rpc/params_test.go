package rpc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

type actorParams struct {
	Kind string `json:"kind"`
}

type ExtraParams struct {
	Extra bool `json:"extra"`
}

type sampleParams struct {
	Token   string         `json:"token"`
	FromSeq *int64         `json:"from_seq"`
	Small   int8           `json:"small"`
	Ratio   float64        `json:"ratio"`
	Live    bool           `json:"live"`
	Actor   actorParams    `json:"actor"`
	Types   []string       `json:"types"`
	Labels  map[string]int `json:"labels"`
	Raw     codec.RawJSON  `json:"raw"`
	At      time.Time      `json:"at"`
	ExtraParams
}

// goWords are what a message naming Go types or decoder internals would
// contain; none may reach a client.
var goWords = []string{"Go ", "go struct", "of type", "json:", "msgpack", "unmarshal", "int8", "int64", "float64",
	"string/bytes", "interface", "map[", "[]", "rpc.", "codec.", "sampleParams", "actorParams", "invalid code", "time.Time"}

func TestDecodeParamsMessages(t *testing.T) {
	for _, tc := range []struct {
		params string // JSON; transcoded for MessagePack
		want   string // "" when the params decode
		// The MessagePack decoder takes these without an error: it wraps
		// integers to the field's size and fills a struct from an array.
		jsonOnly bool
	}{
		{`{"token":"abc","from_seq":3,"small":-5,"ratio":2,"live":true,"actor":{"kind":"human"},"types":["a"],"labels":{"x":1},"raw":[1,{"a":null}],"extra":false}`, "", false},
		{`{"token":null,"from_seq":null,"unknown":[1,2]}`, "", false},
		{`{"token":5}`, "params.token must be a string", false},
		{`{"token":{"a":1}}`, "params.token must be a string", false},
		{`{"from_seq":"x"}`, "params.from_seq must be an integer", false},
		{`{"from_seq":1.5}`, "params.from_seq must be an integer", false},
		{`{"from_seq":true}`, "params.from_seq must be an integer", false},
		{`{"small":300}`, "params.small must be an integer", true},
		{`{"ratio":"x"}`, "params.ratio must be a number", false},
		{`{"live":1}`, "params.live must be a boolean", false},
		{`{"actor":3}`, "params.actor must be an object", false},
		{`{"actor":[]}`, "params.actor must be an object", true},
		{`{"actor":{"kind":true}}`, "params.actor.kind must be a string", false},
		{`{"types":"x"}`, "params.types must be an array", false},
		{`{"types":["a",1]}`, "params.types[1] must be a string", false},
		{`{"labels":{"a":1,"b":"x"}}`, "params.labels.b must be an integer", false},
		{`{"labels":[1]}`, "params.labels must be an object", false},
		{`{"extra":"yes"}`, "params.extra must be a boolean", false},
		{`{"token":"ok","live":"no","small":"no"}`, "params.small must be an integer", false}, // the first in declaration order
		{`["abc"]`, "params must be an object", false},
		{`[]`, "params must be an object", false},
		{`{"at":"yesterday"}`, "invalid params", false},
	} {
		for _, c := range codecs {
			if tc.jsonOnly && c.Binary() {
				continue
			}
			raw := []byte(tc.params)
			if c.Binary() {
				var err error
				if raw, err = codec.ToMsgpack(raw); err != nil {
					t.Fatal(err)
				}
			}
			var p sampleParams
			err := decodeParams(c, raw, &p)
			if tc.want == "" {
				if err != nil {
					t.Errorf("%s %s: %v", c.Name(), tc.params, err)
				}
				continue
			}
			checkParamsError(t, c.Name()+" "+tc.params, err, tc.want)
		}
	}
}

// Params that are not a map are refused before decoding also for other
// targets, and a map target gets the same words.
func TestDecodeParamsOtherTargets(t *testing.T) {
	for _, c := range codecs {
		raw, _ := c.Marshal([]any{1, 2})
		var m map[string]any
		checkParamsError(t, c.Name()+" map target", decodeParams(c, raw, &m), "params must be an object")
		var list []int
		if err := decodeParams(c, raw, &list); err != nil || len(list) != 2 {
			t.Errorf("%s: array params into a slice: %v %v", c.Name(), list, err)
		}
		raw, _ = c.Marshal(map[string]any{"n": "x"})
		var ints map[string]int64
		checkParamsError(t, c.Name()+" map of integers", decodeParams(c, raw, &ints), "params.n must be an integer")
		// Not a pointer: the handler's bug, an internal error with no detail for the peer.
		var p sampleParams
		err := decodeParams(c, raw, p)
		if Code(err) != 0 {
			t.Errorf("%s: non-pointer target: %v, want an error without a code (-32603 on the wire)", c.Name(), err)
		}
	}
	// MessagePack maps may have keys that are not strings.
	raw, err := codec.MsgPack.Marshal(map[any]any{1: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var p sampleParams
	checkParamsError(t, "msgpack integer keys", decodeParams(codec.MsgPack, raw, &p), "invalid params")
	// encoding/json matches keys regardless of case.
	var q sampleParams
	checkParamsError(t, "json key case", decodeParams(codec.JSON, []byte(`{"TOKEN":5}`), &q), "params.token must be a string")
}

func decodeParams(c codec.Codec, raw []byte, v any) error {
	a, _ := NewPipe(1)
	defer a.Close()
	k := NewConn(a, c, nil)
	defer k.Close()
	return (&Request{Conn: k, Method: "m", ID: 1, Params: raw}).Decode(v)
}

func checkParamsError(t *testing.T, name string, err error, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalidParams.Code {
		t.Errorf("%s: got %v, want -32602", name, err)
		return
	}
	if e.Message != want {
		t.Errorf("%s: message %q, want %q", name, e.Message, want)
	}
	for _, w := range goWords {
		if strings.Contains(strings.ToLower(e.Message), strings.ToLower(w)) {
			t.Errorf("%s: message %q names Go internals (%q)", name, e.Message, w)
		}
	}
}

// fuzzParams checks that any params decode or are refused with -32602 in
// the protocol's words.
func fuzzParams(t *testing.T, c codec.Codec, data []byte) {
	var p sampleParams
	err := decodeParams(c, data, &p)
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalidParams.Code {
		t.Fatalf("%q: %v, want -32602", data, err)
	}
	if e.Message == "invalid params" || e.Message == "params must be an object" {
		return
	}
	for _, want := range []string{"a string", "an integer", "a non-negative integer", "a number", "a boolean", "an object", "an array"} {
		if strings.HasPrefix(e.Message, "params") && strings.HasSuffix(e.Message, " must be "+want) {
			return
		}
	}
	t.Fatalf("%q: message %q is not in the protocol's words", data, e.Message)
}

func FuzzParamsJSON(f *testing.F) {
	f.Add([]byte(`{"token":5,"types":["a",{}],"labels":{"x":"y"}}`))
	f.Add([]byte(`{"actor":{"kind":[]},"from_seq":1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzParams(t, codec.JSON, data) })
}

func FuzzParamsMsgpack(f *testing.F) {
	for _, js := range []string{`{"token":5,"types":["a",{}],"labels":{"x":"y"}}`, `{"actor":{"kind":[]},"small":-1.5}`} {
		raw, err := codec.ToMsgpack([]byte(js))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte("\x81\x01\xa1x"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzParams(t, codec.MsgPack, data) })
}
