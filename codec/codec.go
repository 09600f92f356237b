package codec

import "bytes"

// Codec encodes and decodes envelopes and values in one wire format.
// Implementations are safe for concurrent use.
type Codec interface {
	// Name is the WebSocket subprotocol.
	Name() string
	// Binary reports whether frames are binary (MessagePack) or text (JSON).
	Binary() bool
	// Encode appends the encoding of m to dst.
	Encode(dst []byte, m *Message) ([]byte, error)
	// Decode parses one envelope. Errors are *DecodeError.
	Decode(data []byte, m *Message) error
	// Marshal encodes a value (params, result, error data) using json struct tags.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes raw params or result into v using json struct tags.
	Unmarshal(data []byte, v any) error
	// Splice appends a notification for method whose params are the encoded
	// object body with "subscription": subscription added as its first field.
	Splice(dst []byte, method, subscription string, body []byte) ([]byte, error)
	// SpliceHead is Splice in three parts, for a writer that sends body's bytes where they
	// are (an encoded event shared by many connections) rather than copying them: it appends
	// to dst the notification up to where body's own fields begin and returns that, with
	// rest, the part of body that follows (a subslice of it), and tail, what ends the
	// notification (a constant, never to be changed). Splice's result is head+rest+tail.
	SpliceHead(dst []byte, method, subscription string, body []byte) (head, rest, tail []byte, err error)
}

// The two codecs of the realtime API.
var (
	JSON    Codec = jsonCodec{}
	MsgPack Codec = msgpackCodec{}
)

// ByName returns the codec for a subprotocol name, or nil.
func ByName(name string) Codec {
	switch name {
	case NameMsgPack:
		return MsgPack
	case NameJSON:
		return JSON
	}
	return nil
}

// IsArray reports whether raw, one value encoded by c (params, say), is an
// array. MessagePack decoders fill a struct from an array by field order;
// the realtime API's params are objects, so callers refuse arrays first.
func IsArray(c Codec, raw []byte) bool {
	if c.Binary() {
		return len(raw) > 0 && isArray(raw[0])
	}
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '['
}
