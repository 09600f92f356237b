package codec

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

type jsonCodec struct{}

func (jsonCodec) Name() string { return NameJSON }
func (jsonCodec) Binary() bool { return false }

// Marshal encodes v as JSON text, always UTF-8: a text frame that is not
// fails the connection (RFC 6455 §8.1, close 1007). encoding/json makes Go
// strings so; invalid UTF-8 carried by raw values (RawJSON) becomes U+FFFD
// the same way.
func (jsonCodec) Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || utf8.Valid(b) {
		return b, err
	}
	// Outside strings JSON is ASCII: only string contents change.
	return bytes.ToValidUTF8(b, []byte("\uFFFD")), nil
}

func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func (jsonCodec) Encode(dst []byte, m *Message) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	if m.Method != "" {
		if m.HasID {
			dst = append(dst, `,"id":`...)
			dst = strconv.AppendInt(dst, m.ID, 10)
		}
		dst = append(dst, `,"method":`...)
		dst = appendJSONString(dst, m.Method)
		if m.Params != nil {
			dst = append(dst, `,"params":`...)
			dst = append(dst, m.Params...)
		}
		return append(dst, '}'), nil
	}
	dst = append(dst, `,"id":`...)
	if m.HasID {
		dst = strconv.AppendInt(dst, m.ID, 10)
	} else {
		dst = append(dst, "null"...)
	}
	if m.Error != nil {
		dst = append(dst, `,"error":{"code":`...)
		dst = strconv.AppendInt(dst, int64(m.Error.Code), 10)
		dst = append(dst, `,"message":`...)
		dst = appendJSONString(dst, m.Error.Message)
		if m.Error.Data != nil {
			dst = append(dst, `,"data":`...)
			dst = append(dst, m.Error.Data...)
		}
		return append(dst, "}}"...), nil
	}
	dst = append(dst, `,"result":`...)
	if m.Result == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, m.Result...)
	}
	return append(dst, '}'), nil
}

func (c jsonCodec) Decode(data []byte, m *Message) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return parseErr("empty message")
	}
	if !json.Valid(data) {
		return parseErr("invalid JSON")
	}
	switch trimmed[0] {
	case '[':
		return invalidReq("batch requests are not supported")
	case '{':
	default:
		return invalidReq("a message must be an object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return parseErr("invalid JSON")
	}
	var e envelope
	if raw, ok := fields["id"]; ok {
		e.id, e.idState = jsonID(raw)
	}
	if raw, ok := fields["jsonrpc"]; ok {
		if err := json.Unmarshal(raw, &e.version); err == nil {
			e.hasVersion = true
		}
	}
	if raw, ok := fields["method"]; ok {
		if err := json.Unmarshal(raw, &e.method); err != nil {
			return e.fail("method must be a string")
		}
		e.hasMethod = true
	}
	if raw, ok := fields["params"]; ok && !isJSONNull(raw) {
		if raw[0] != '{' && raw[0] != '[' {
			return e.fail("params must be an object or an array")
		}
		e.params = raw
	}
	if raw, ok := fields["result"]; ok {
		e.result = raw
	}
	if raw, ok := fields["error"]; ok {
		e.errRaw = raw
	}
	return e.check(c, m)
}

func (jsonCodec) decodeError(raw []byte) (*Error, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	var e Error
	code, state := jsonID(fields["code"])
	if state != idInt || code != int64(int(code)) {
		return nil, invalidReq("error code must be an integer")
	}
	e.Code = int(code)
	msg, ok := fields["message"]
	if !ok {
		return nil, invalidReq("error message is missing")
	}
	if err := json.Unmarshal(msg, &e.Message); err != nil {
		return nil, err
	}
	if d, ok := fields["data"]; ok {
		e.Data = d
	}
	return &e, nil
}

func (c jsonCodec) Splice(dst []byte, method, subscription string, body []byte) ([]byte, error) {
	head, rest, tail, err := c.SpliceHead(dst, method, subscription, body)
	if err != nil {
		return dst, err
	}
	return append(append(head, rest...), tail...), nil
}

// jsonTail ends a spliced JSON notification: its params, then the envelope.
var jsonTail = []byte("}}")

func (jsonCodec) SpliceHead(dst []byte, method, subscription string, body []byte) (head, rest, tail []byte, err error) {
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return dst, nil, nil, ErrNotObject
	}
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = appendJSONString(dst, method)
	dst = append(dst, `,"params":{"subscription":`...)
	dst = appendJSONString(dst, subscription)
	if inner := bytes.TrimSpace(body[1 : len(body)-1]); len(inner) > 0 {
		dst = append(dst, ',')
		rest = inner
	}
	return dst, rest, jsonTail[:len(jsonTail):len(jsonTail)], nil
}

// fail builds an invalid-request error carrying the id when it is usable.
func (e *envelope) fail(msg string) error {
	de := invalidReq("%s", msg)
	if e.idState == idInt {
		de.ID, de.HasID = e.id, true
	}
	return de
}

func isJSONNull(raw []byte) bool { return string(raw) == "null" }

// jsonID classifies a raw JSON id: only plain integers (no fraction or
// exponent) that fit in int64 are integers.
func jsonID(raw []byte) (int64, idState) {
	if raw == nil {
		return 0, idAbsent
	}
	if isJSONNull(raw) {
		return 0, idNull
	}
	s := string(raw)
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, idBad
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, idBad
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, idBad
	}
	return n, idInt
}
