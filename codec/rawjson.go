package codec

import (
	"encoding/json"
	"errors"
	"fmt"

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
	b, err := appendJSONAsMsgpack(nil, r)
	if err != nil {
		return fmt.Errorf("codec: transcode JSON: %w", err)
	}
	return enc.Encode(msgpack.RawMessage(b))
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
