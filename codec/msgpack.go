package codec

import (
	"bytes"
	"errors"
	"math"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

type msgpackCodec struct{}

func (msgpackCodec) Name() string { return NameMsgPack }
func (msgpackCodec) Binary() bool { return true }

type encState struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encPool = sync.Pool{New: func() any {
	s := &encState{}
	s.enc = msgpack.NewEncoder(&s.buf)
	s.enc.SetCustomStructTag("json")
	s.enc.UseCompactInts(true)
	return s
}}

type decState struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var decPool = sync.Pool{New: func() any {
	s := &decState{}
	s.dec = msgpack.NewDecoder(&s.r)
	s.dec.SetCustomStructTag("json")
	s.dec.UseLooseInterfaceDecoding(true)
	return s
}}

func getDecoder(data []byte) *decState {
	s := decPool.Get().(*decState)
	s.r.Reset(data)
	s.dec.Reset(&s.r)
	s.dec.SetCustomStructTag("json")
	s.dec.UseLooseInterfaceDecoding(true)
	return s
}

func putDecoder(s *decState) {
	s.r.Reset(nil)
	decPool.Put(s)
}

func (msgpackCodec) Marshal(v any) ([]byte, error) {
	s := encPool.Get().(*encState)
	defer encPool.Put(s)
	s.buf.Reset()
	if err := s.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(s.buf.Bytes()), nil
}

func (msgpackCodec) Unmarshal(data []byte, v any) error {
	if !validMsgpack(data) {
		return errors.New("msgpack: malformed or too deeply nested value")
	}
	s := getDecoder(data)
	defer putDecoder(s)
	if err := s.dec.Decode(v); err != nil {
		return err
	}
	if s.r.Len() != 0 {
		return errors.New("msgpack: trailing data")
	}
	return nil
}

func (msgpackCodec) Encode(dst []byte, m *Message) ([]byte, error) {
	if m.Method != "" {
		n := 2
		if m.HasID {
			n++
		}
		if m.Params != nil {
			n++
		}
		dst = appendMapHeader(dst, n+0)
		dst = appendStr(dst, "jsonrpc")
		dst = appendStr(dst, "2.0")
		if m.HasID {
			dst = appendStr(dst, "id")
			dst = appendInt(dst, m.ID)
		}
		dst = appendStr(dst, "method")
		dst = appendStr(dst, m.Method)
		if m.Params != nil {
			dst = appendStr(dst, "params")
			dst = append(dst, m.Params...)
		}
		return dst, nil
	}
	dst = appendMapHeader(dst, 3)
	dst = appendStr(dst, "jsonrpc")
	dst = appendStr(dst, "2.0")
	dst = appendStr(dst, "id")
	if m.HasID {
		dst = appendInt(dst, m.ID)
	} else {
		dst = append(dst, msgpcode.Nil)
	}
	if m.Error != nil {
		dst = appendStr(dst, "error")
		n := 2
		if m.Error.Data != nil {
			n++
		}
		dst = appendMapHeader(dst, n)
		dst = appendStr(dst, "code")
		dst = appendInt(dst, int64(m.Error.Code))
		dst = appendStr(dst, "message")
		dst = appendStr(dst, m.Error.Message)
		if m.Error.Data != nil {
			dst = appendStr(dst, "data")
			dst = append(dst, m.Error.Data...)
		}
		return dst, nil
	}
	dst = appendStr(dst, "result")
	if m.Result == nil {
		return append(dst, msgpcode.Nil), nil
	}
	return append(dst, m.Result...), nil
}

func (c msgpackCodec) Decode(data []byte, m *Message) error {
	if len(data) == 0 {
		return parseErr("empty message")
	}
	// Validate the whole frame first: one complete value, nothing after it.
	if !validMsgpack(data) {
		return parseErr("invalid MessagePack")
	}
	code := data[0]
	switch {
	case msgpcode.IsFixedArray(code) || code == msgpcode.Array16 || code == msgpcode.Array32:
		return invalidReq("batch requests are not supported")
	case msgpcode.IsFixedMap(code) || code == msgpcode.Map16 || code == msgpcode.Map32:
	default:
		return invalidReq("a message must be a map")
	}
	s := getDecoder(data)
	defer putDecoder(s)
	d := s.dec
	n, err := d.DecodeMapLen()
	if err != nil {
		return parseErr("invalid MessagePack")
	}
	var e envelope
	var shapeErr string
	for i := 0; i < n; i++ {
		kc, err := d.PeekCode()
		if err != nil {
			return parseErr("invalid MessagePack")
		}
		if !msgpcode.IsString(kc) {
			if err := d.Skip(); err != nil {
				return parseErr("invalid MessagePack")
			}
			if err := d.Skip(); err != nil {
				return parseErr("invalid MessagePack")
			}
			shapeErr = "keys must be strings"
			continue
		}
		key, err := d.DecodeString()
		if err != nil {
			return parseErr("invalid MessagePack")
		}
		vc, err := d.PeekCode()
		if err != nil {
			return parseErr("invalid MessagePack")
		}
		switch key {
		case "jsonrpc":
			if msgpcode.IsString(vc) {
				e.version, err = d.DecodeString()
				e.hasVersion = err == nil
			} else {
				err = d.Skip()
			}
		case "id":
			e.id, e.idState, err = msgpackID(d, vc)
		case "method":
			if msgpcode.IsString(vc) {
				e.method, err = d.DecodeString()
				e.hasMethod = true
			} else {
				err = d.Skip()
				shapeErr = "method must be a string"
			}
		case "params":
			var raw msgpack.RawMessage
			raw, err = d.DecodeRaw()
			switch {
			case vc == msgpcode.Nil:
			case isMap(vc) || isArray(vc):
				e.params = raw
			default:
				shapeErr = "params must be a map or an array"
			}
		case "result":
			var raw msgpack.RawMessage
			raw, err = d.DecodeRaw()
			e.result = raw
		case "error":
			var raw msgpack.RawMessage
			raw, err = d.DecodeRaw()
			e.errRaw = raw
		default:
			err = d.Skip()
		}
		if err != nil {
			return parseErr("invalid MessagePack")
		}
	}
	if shapeErr != "" {
		return e.fail(shapeErr)
	}
	return e.check(c, m)
}

func msgpackID(d *msgpack.Decoder, code byte) (int64, idState, error) {
	switch {
	case code == msgpcode.Nil:
		return 0, idNull, d.Skip()
	case msgpcode.IsFixedNum(code), code == msgpcode.Int8, code == msgpcode.Int16,
		code == msgpcode.Int32, code == msgpcode.Int64, code == msgpcode.Uint8,
		code == msgpcode.Uint16, code == msgpcode.Uint32:
		n, err := d.DecodeInt64()
		return n, idInt, err
	case code == msgpcode.Uint64:
		u, err := d.DecodeUint64()
		if err != nil {
			return 0, idBad, err
		}
		if u > math.MaxInt64 {
			return 0, idBad, nil
		}
		return int64(u), idInt, nil
	default:
		return 0, idBad, d.Skip()
	}
}

func (msgpackCodec) decodeError(raw []byte) (*Error, error) {
	s := getDecoder(raw)
	defer putDecoder(s)
	d := s.dec
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, errors.New("error is not a map")
	}
	var e Error
	var hasCode, hasMsg bool
	for i := 0; i < n; i++ {
		key, err := d.DecodeString()
		if err != nil {
			return nil, err
		}
		vc, err := d.PeekCode()
		if err != nil {
			return nil, err
		}
		switch key {
		case "code":
			id, st, err := msgpackID(d, vc)
			if err != nil || st != idInt || id != int64(int(id)) {
				return nil, errors.New("error code is not an integer")
			}
			e.Code, hasCode = int(id), true
		case "message":
			if !msgpcode.IsString(vc) {
				return nil, errors.New("error message is not a string")
			}
			if e.Message, err = d.DecodeString(); err != nil {
				return nil, err
			}
			hasMsg = true
		case "data":
			raw, err := d.DecodeRaw()
			if err != nil {
				return nil, err
			}
			e.Data = raw
		default:
			if err := d.Skip(); err != nil {
				return nil, err
			}
		}
	}
	if !hasCode || !hasMsg {
		return nil, errors.New("error needs code and message")
	}
	return &e, nil
}

func (c msgpackCodec) Splice(dst []byte, method, subscription string, body []byte) ([]byte, error) {
	head, rest, _, err := c.SpliceHead(dst, method, subscription, body)
	if err != nil {
		return dst, err
	}
	return append(head, rest...), nil
}

// SpliceHead's tail is empty: a MessagePack map ends with its last entry.
func (msgpackCodec) SpliceHead(dst []byte, method, subscription string, body []byte) (head, rest, tail []byte, err error) {
	n, hdr, ok := mapHeader(body)
	if !ok {
		return dst, nil, nil, ErrNotObject
	}
	dst = appendMapHeader(dst, 3)
	dst = appendStr(dst, "jsonrpc")
	dst = appendStr(dst, "2.0")
	dst = appendStr(dst, "method")
	dst = appendStr(dst, method)
	dst = appendStr(dst, "params")
	dst = appendMapHeader(dst, n+1)
	dst = appendStr(dst, "subscription")
	dst = appendStr(dst, subscription)
	return dst, body[hdr:], nil, nil
}

func isMap(c byte) bool { return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 }
func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

// mapHeader parses a MessagePack map header: entry count and header length.
func mapHeader(b []byte) (n, size int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch c := b[0]; {
	case msgpcode.IsFixedMap(c):
		return int(c & 0x0f), 1, true
	case c == msgpcode.Map16 && len(b) >= 3:
		return int(b[1])<<8 | int(b[2]), 3, true
	case c == msgpcode.Map32 && len(b) >= 5:
		return int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4]), 5, true
	}
	return 0, 0, false
}

func appendMapHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, msgpcode.FixedMapLow|byte(n))
	case n <= math.MaxUint16:
		return append(dst, msgpcode.Map16, byte(n>>8), byte(n))
	default:
		return append(dst, msgpcode.Map32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendStr(dst []byte, s string) []byte {
	return append(appendStrHeader(dst, len(s)), s...)
}

// appendStrHeader appends the header of a string of n bytes.
func appendStrHeader(dst []byte, n int) []byte {
	switch {
	case n < 32:
		return append(dst, msgpcode.FixedStrLow|byte(n))
	case n <= math.MaxUint8:
		return append(dst, msgpcode.Str8, byte(n))
	case n <= math.MaxUint16:
		return append(dst, msgpcode.Str16, byte(n>>8), byte(n))
	default:
		return append(dst, msgpcode.Str32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// appendInt appends n in the most compact MessagePack integer form, as
// MessagePack libraries do: unsigned formats for non-negative values.
func appendInt(dst []byte, n int64) []byte {
	switch {
	case n >= 0 && n <= 127, n < 0 && n >= -32:
		return append(dst, byte(n))
	case n > 0 && n <= math.MaxUint8:
		return append(dst, msgpcode.Uint8, byte(n))
	case n > 0 && n <= math.MaxUint16:
		return append(dst, msgpcode.Uint16, byte(n>>8), byte(n))
	case n > 0 && n <= math.MaxUint32:
		return append(dst, msgpcode.Uint32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	case n > 0:
		return append(dst, msgpcode.Uint64, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	case n >= math.MinInt8:
		return append(dst, msgpcode.Int8, byte(n))
	case n >= math.MinInt16:
		return append(dst, msgpcode.Int16, byte(n>>8), byte(n))
	case n >= math.MinInt32:
		return append(dst, msgpcode.Int32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(dst, msgpcode.Int64, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}
