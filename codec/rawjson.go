package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// RawJSON is a JSON text carried as a value: JSON embeds it verbatim and
// MessagePack carries the equivalent MessagePack value (objects as maps,
// integers as integers), so payloads mean the same in both codecs. An empty
// RawJSON encodes as null.
type RawJSON []byte

var (
	_               json.Marshaler        = RawJSON(nil)
	_               json.Unmarshaler      = (*RawJSON)(nil)
	_               msgpack.CustomEncoder = RawJSON(nil)
	_               msgpack.CustomDecoder = (*RawJSON)(nil)
	errTrailingJSON                       = errors.New("codec: trailing data after JSON value")
)

// MarshalJSON returns r itself.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// UnmarshalJSON stores a copy of data.
func (r *RawJSON) UnmarshalJSON(data []byte) error {
	*r = append((*r)[:0], data...)
	return nil
}

// EncodeMsgpack transcodes the JSON text to MessagePack, keeping object key order.
func (r RawJSON) EncodeMsgpack(enc *msgpack.Encoder) error {
	if len(r) == 0 {
		return enc.EncodeNil()
	}
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.UseNumber()
	if err := transcode(dec, enc, 0); err != nil {
		return fmt.Errorf("codec: transcode JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailingJSON
	}
	return nil
}

// DecodeMsgpack decodes any MessagePack value into its JSON text.
func (r *RawJSON) DecodeMsgpack(dec *msgpack.Decoder) error {
	v, err := dec.DecodeInterfaceLoose()
	if err != nil {
		return err
	}
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return fmt.Errorf("codec: value has no JSON form: %w", err)
	}
	*r = b
	return nil
}

// jsonable converts decoded MessagePack values into forms encoding/json accepts
// (maps with non-string keys are rejected by Marshal, which is the intent).
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
	}
	return v
}

// ToMsgpack converts a JSON text to the equivalent MessagePack encoding.
func ToMsgpack(js []byte) ([]byte, error) {
	return MsgPack.Marshal(RawJSON(js))
}

func transcode(dec *json.Decoder, enc *msgpack.Encoder, depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			// Keys and values are buffered so the map length can be written first.
			var kv [][]byte
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks, ok := k.(string)
				if !ok {
					return errors.New("object key is not a string")
				}
				sub, err := transcodeOne(dec, depth+1)
				if err != nil {
					return err
				}
				kv = append(kv, appendStr(nil, ks), sub)
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			if err := enc.EncodeMapLen(len(kv) / 2); err != nil {
				return err
			}
			return writeRaw(enc, kv)
		case '[':
			var items [][]byte
			for dec.More() {
				sub, err := transcodeOne(dec, depth+1)
				if err != nil {
					return err
				}
				items = append(items, sub)
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			if err := enc.EncodeArrayLen(len(items)); err != nil {
				return err
			}
			return writeRaw(enc, items)
		}
		return fmt.Errorf("unexpected %v", t)
	case string:
		return enc.EncodeString(t)
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return enc.EncodeInt(n)
		}
		f, err := t.Float64()
		if err != nil {
			return err
		}
		return enc.EncodeFloat64(f)
	case bool:
		return enc.EncodeBool(t)
	case nil:
		return enc.EncodeNil()
	}
	return fmt.Errorf("unexpected token %v", tok)
}

func transcodeOne(dec *json.Decoder, depth int) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := transcode(dec, enc, depth); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeRaw(enc *msgpack.Encoder, parts [][]byte) error {
	for _, p := range parts {
		if err := enc.Encode(msgpack.RawMessage(p)); err != nil {
			return err
		}
	}
	return nil
}
