package rpc

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/ballet/gateway/codec"
)

// Decode decodes the params into v, a pointer. Absent params leave v
// unchanged. Params that do not fit v are an ErrInvalidParams error that
// says in the protocol's words which field is wrong ("params.token must be
// a string"), never in Go's: the decoder's own error only goes to logs.
func (r *Request) Decode(v any) error {
	if r.Params == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("rpc: params of %s decoded into %T, not a pointer", r.Method, v) // -32603
	}
	c := r.Conn.codec
	t := rv.Type().Elem()
	if isObject(t) && codec.IsArray(c, r.Params) {
		return Errorf(ErrInvalidParams, "params must be an object")
	}
	err := c.Unmarshal(r.Params, v)
	if err == nil {
		return nil
	}
	r.Conn.log.Debug("rpc params do not fit", "method", r.Method, "err", err)
	return &Error{Code: ErrInvalidParams.Code, Message: paramsProblem(c, r.Params, t, err)}
}

// paramsProblem names what is wrong with params that failed to decode into
// a value of type t: the first field, in t's order, whose value is not of
// the protocol type t wants.
func paramsProblem(c codec.Codec, raw []byte, t reflect.Type, err error) string {
	var generic any
	if c.Unmarshal(raw, &generic) == nil {
		if msg := mismatch("params", t, generic, 0); msg != "" {
			return msg
		}
	}
	// encoding/json matches keys case-insensitively, which the walk does not.
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		path := "params"
		if te.Field != "" {
			path += "." + te.Field
		}
		if want := protocolType(te.Type); want != "" {
			return path + " must be " + want
		}
	}
	return ErrInvalidParams.Message
}

const maxParamsDepth = 32

// mismatch walks v, params decoded into generic values (maps, slices,
// strings, numbers, booleans, nil), along t and describes the first value
// that t cannot hold, or returns "" when it finds none. A nil (null) value
// fits anything, as decoders leave the field zero.
func mismatch(path string, t reflect.Type, v any, depth int) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || depth > maxParamsDepth || decodesItself(t) {
		return ""
	}
	bad := path + " must be " + protocolType(t)
	switch t.Kind() {
	case reflect.String:
		switch v.(type) {
		case string, []byte:
			return ""
		}
		return bad
	case reflect.Bool:
		if _, ok := v.(bool); ok {
			return ""
		}
		return bad
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !fitsInteger(t, v) {
			return bad
		}
	case reflect.Float32, reflect.Float64:
		switch reflect.ValueOf(v).Kind() {
		case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return ""
		}
		return bad
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return bad
		}
		return structMismatch(path, t, m, depth)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return bad
		}
		if t.Key().Kind() != reflect.String {
			return ""
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if msg := mismatch(path+"."+k, t.Elem(), m[k], depth+1); msg != "" {
				return msg
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "" // bytes: a string in JSON, binary in MessagePack
		}
		s, ok := v.([]any)
		if !ok {
			return bad
		}
		for i, e := range s {
			if msg := mismatch(fmt.Sprintf("%s[%d]", path, i), t.Elem(), e, depth+1); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// structMismatch checks the fields of m that t has, by their json names.
func structMismatch(path string, t reflect.Type, m map[string]any, depth int) string {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if name == "" && f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if msg := structMismatch(path, ft, m, depth); msg != "" {
					return msg
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if fv, ok := m[name]; ok {
			if msg := mismatch(path+"."+name, f.Type, fv, depth+1); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// fitsInteger reports whether v, a decoded number, is an integer within
// the range of t, an integer type.
func fitsInteger(t reflect.Type, v any) bool {
	z := reflect.New(t).Elem()
	signed := z.CanInt()
	rv := reflect.ValueOf(v)
	switch {
	case rv.CanInt():
		n := rv.Int()
		if signed {
			return !z.OverflowInt(n)
		}
		return n >= 0 && !z.OverflowUint(uint64(n))
	case rv.CanUint():
		u := rv.Uint()
		if signed {
			return u <= math.MaxInt64 && !z.OverflowInt(int64(u))
		}
		return !z.OverflowUint(u)
	case rv.CanFloat():
		f := rv.Float()
		if f != math.Trunc(f) || math.IsInf(f, 0) {
			return false
		}
		if signed {
			return f >= math.MinInt64 && f < math.MaxInt64 && !z.OverflowInt(int64(f))
		}
		return f >= 0 && f < math.MaxUint64 && !z.OverflowUint(uint64(f))
	}
	return false
}

// protocolType names what a value of type t is on the wire, with its
// article, or "" for types that decode themselves or take anything.
func protocolType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if decodesItself(t) {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return ""
		}
		return "an array"
	}
	return ""
}

// isObject reports whether params for t must be an object.
func isObject(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return (t.Kind() == reflect.Struct || t.Kind() == reflect.Map) && !decodesItself(t)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesItself reports whether t has its own decoding (codec.RawJSON,
// time.Time): the walk cannot tell what it accepts.
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	if p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler) {
		return true
	}
	_, msgpack := p.MethodByName("DecodeMsgpack")
	_, unmarshal := p.MethodByName("UnmarshalMsgpack")
	return msgpack || unmarshal
}
