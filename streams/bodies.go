package streams

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/ballet/gateway/codec"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// An item of the window lets its decoded event go once its bodies carry it: when it has both,
// or one that the other codec's body can be transcoded from, byte for byte what encoding the
// event gives. This file holds those transcodings and when they are exact.

// errNotPlain: a MessagePack value whose JSON text is not known from it (a float: "1.0" and
// "1" are the same double).
var errNotPlain = errors.New("streams: value has no single JSON text")

// transcodeBody returns the body in c of an event whose body in the other codec is other.
func transcodeBody(c codec.Codec, other []byte) ([]byte, error) {
	if c.Binary() {
		return codec.ToMsgpack(other)
	}
	return jsonFromMsgpack(other)
}

// msgpackTranscodes reports whether ev's MessagePack body transcoded from its JSON body
// (codec.ToMsgpack) is its MessagePack body: when its text is UTF-8. The JSON body writes
// what is not as U+FFFD, which MessagePack carries as it is.
func msgpackTranscodes(ev *Event) bool {
	for _, s := range [...]string{ev.Type, ev.EntityType, ev.EntityID, ev.EntityKey, ev.ActorKind, ev.ActorSubject} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return utf8.Valid(ev.Payload)
}

// jsonTranscodes reports whether ev's JSON body transcoded from its MessagePack body
// (jsonFromMsgpack) is its JSON body: when its payload is plain.
func jsonTranscodes(ev *Event) bool { return plainPayload(ev.Payload) }

// plainPayload reports whether the JSON text p, once compacted as the JSON body embeds it,
// is what its MessagePack encoding gives back (appendMsgpackAsJSON): UTF-8, its numbers
// integers of int64 as written canonically (not -0), and in its strings only the escapes
// encoding/json writes for the characters it must escape. Payloads as Postgres renders them
// are, but for numbers with a fraction or an exponent. An empty payload is sent as {}.
func plainPayload(p []byte) bool {
	if !utf8.Valid(p) {
		return false
	}
	inString := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if inString {
			switch c {
			case '"':
				inString = false
			case '\\':
				n := escapeLen(p[i:])
				if n == 0 {
					return false
				}
				i += n - 1
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(p) && (p[j] >= '0' && p[j] <= '9' || p[j] == '.' || p[j] == 'e' || p[j] == 'E' ||
				p[j] == '+' || p[j] == '-') {
				j++
			}
			num := string(p[i:j])
			if _, err := strconv.ParseInt(num, 10, 64); err != nil || num == "-0" {
				return false
			}
			i = j - 1
		}
	}
	return true
}

// escapeLen returns the length of the escape at the start of s when it is the one
// encoding/json writes for its character, else 0.
func escapeLen(s []byte) int {
	if len(s) < 2 {
		return 0
	}
	switch s[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		// \u00xx, lower case, for the control characters without a short escape.
		if len(s) < 6 || s[2] != '0' || s[3] != '0' || s[4] != '0' && s[4] != '1' {
			return 0
		}
		h := s[5]
		if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f') {
			return 0
		}
		if s[4] == '0' && (h == '8' || h == '9' || h == 'a' || h == 'c' || h == 'd') {
			return 0 // \b \t \n \f \r
		}
		return 6
	}
	return 0
}

// msgpackWire is WireEvent as its MessagePack body is read back: the payload as it is. Its
// Payload, declared first, hides WireEvent's, which msgpack's inlining then leaves out (the
// transcoding tests fail the day it does not).
type msgpackWire struct {
	Payload   msgpack.RawMessage `json:"payload"`
	WireEvent `msgpack:",inline"`
}

// jsonFromMsgpack returns the JSON body of an event from its MessagePack body: the same bytes
// as encoding the event in JSON when its payload is plain (plainPayload).
func jsonFromMsgpack(body []byte) ([]byte, error) {
	var m msgpackWire
	if err := codec.MsgPack.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	payload := []byte("null") // a nil payload is read back as none
	if len(m.Payload) > 0 {
		var rest []byte
		var err error
		if payload, rest, err = appendMsgpackAsJSON(nil, m.Payload, 0); err != nil {
			return nil, err
		}
		if len(rest) != 0 {
			return nil, errors.New("streams: trailing data after the payload")
		}
	}
	m.WireEvent.Payload = payload
	return codec.JSON.Marshal(&m.WireEvent)
}

// maxPayloadDepth bounds the nesting appendMsgpackAsJSON follows (codec's is less).
const maxPayloadDepth = 10000

// appendMsgpackAsJSON appends the JSON text of the MessagePack value at the start of b, the
// kinds codec.RawJSON transcodes JSON to (maps with string keys in their order, arrays,
// strings, integers, nil, booleans), and returns the rest of b. A float is errNotPlain.
// Strings are escaped as encoding/json escapes them, but for <, >, & and U+2028/9, which
// the JSON encoder escapes when it embeds the text.
func appendMsgpackAsJSON(dst, b []byte, depth int) ([]byte, []byte, error) {
	if len(b) == 0 || depth > maxPayloadDepth {
		return dst, b, errBadMsgpack
	}
	c := b[0]
	switch {
	case msgpcode.IsFixedNum(c):
		return strconv.AppendInt(dst, int64(int8(c)), 10), b[1:], nil
	case c == msgpcode.Nil:
		return append(dst, "null"...), b[1:], nil
	case c == msgpcode.True:
		return append(dst, "true"...), b[1:], nil
	case c == msgpcode.False:
		return append(dst, "false"...), b[1:], nil
	case c == msgpcode.Float || c == msgpcode.Double:
		return dst, b, errNotPlain
	case c >= msgpcode.Uint8 && c <= msgpcode.Int64:
		return appendMsgpackInt(dst, b)
	case msgpcode.IsString(c):
		s, rest, err := msgpackSpan(b)
		if err != nil {
			return dst, b, err
		}
		if !utf8.Valid(s) {
			return dst, b, errNotPlain
		}
		return codec.AppendJSONText(dst, s), rest, nil
	}
	n, rest, object, err := msgpackContainer(b)
	if err != nil {
		return dst, b, err
	}
	open, end := byte('['), byte(']')
	if object {
		open, end = '{', '}'
	}
	dst = append(dst, open)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		if object {
			if len(rest) == 0 || !msgpcode.IsString(rest[0]) {
				return dst, b, errBadMsgpack
			}
			if dst, rest, err = appendMsgpackAsJSON(dst, rest, depth+1); err != nil {
				return dst, b, err
			}
			dst = append(dst, ':')
		}
		if dst, rest, err = appendMsgpackAsJSON(dst, rest, depth+1); err != nil {
			return dst, b, err
		}
	}
	return append(dst, end), rest, nil
}

var errBadMsgpack = errors.New("streams: malformed MessagePack payload")

// appendMsgpackInt appends the integer at the start of b, one of the sized formats.
func appendMsgpackInt(dst, b []byte) ([]byte, []byte, error) {
	size := 1 << ((b[0] - msgpcode.Uint8) % 4) // Uint8 to Uint64, then Int8 to Int64
	if len(b) < 1+size {
		return dst, b, errBadMsgpack
	}
	var u uint64
	for _, x := range b[1 : 1+size] {
		u = u<<8 | uint64(x)
	}
	rest := b[1+size:]
	if b[0] <= msgpcode.Uint64 {
		if u > math.MaxInt64 {
			return dst, b, errNotPlain // not from an integer of JSON that fits int64
		}
		return strconv.AppendUint(dst, u, 10), rest, nil
	}
	shift := 64 - 8*size
	return strconv.AppendInt(dst, int64(u<<shift)>>shift, 10), rest, nil
}

// msgpackSpan returns the bytes of the string at the start of b and the rest of b.
func msgpackSpan(b []byte) ([]byte, []byte, error) {
	c := b[0]
	var n, h int
	switch {
	case msgpcode.IsFixedString(c):
		n, h = int(c&msgpcode.FixedStrMask), 1
	case c == msgpcode.Str8 && len(b) >= 2:
		n, h = int(b[1]), 2
	case c == msgpcode.Str16 && len(b) >= 3:
		n, h = int(binary.BigEndian.Uint16(b[1:])), 3
	case c == msgpcode.Str32 && len(b) >= 5:
		n, h = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return nil, b, errBadMsgpack
	}
	if len(b)-h < n {
		return nil, b, errBadMsgpack
	}
	return b[h : h+n], b[h+n:], nil
}

// msgpackContainer reads the header of the map or array at the start of b.
func msgpackContainer(b []byte) (n int, rest []byte, object bool, err error) {
	c := b[0]
	switch {
	case msgpcode.IsFixedMap(c):
		return int(c & msgpcode.FixedMapMask), b[1:], true, nil
	case msgpcode.IsFixedArray(c):
		return int(c & msgpcode.FixedArrayMask), b[1:], false, nil
	case (c == msgpcode.Map16 || c == msgpcode.Array16) && len(b) >= 3:
		return int(binary.BigEndian.Uint16(b[1:])), b[3:], c == msgpcode.Map16, nil
	case (c == msgpcode.Map32 || c == msgpcode.Array32) && len(b) >= 5:
		return int(binary.BigEndian.Uint32(b[1:])), b[5:], c == msgpcode.Map32, nil
	}
	return 0, b, false, errBadMsgpack
}
