package codec

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

var errBadJSON = errors.New("codec: invalid JSON")

// appendJSONAsMsgpack appends the MessagePack encoding of the JSON text src
// to dst: objects become maps (keys in their JSON order), integers that fit
// int64 become integers, other numbers float64. It reads src once, without
// building values, and rejects what encoding/json rejects.
func appendJSONAsMsgpack(dst, src []byte) ([]byte, error) {
	p := jsonScanner{s: src}
	p.space()
	dst, err := p.value(dst, 0)
	if err != nil {
		return dst, err
	}
	p.space()
	if p.i != len(p.s) {
		return dst, errTrailingJSON
	}
	return dst, nil
}

type jsonScanner struct {
	s []byte
	i int
}

func (p *jsonScanner) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScanner) value(dst []byte, depth int) ([]byte, error) {
	if p.i >= len(p.s) {
		return dst, errBadJSON
	}
	switch c := p.s[p.i]; {
	case c == '{':
		if depth >= maxDepth {
			return dst, errors.New("codec: JSON nested too deeply")
		}
		return p.container(dst, depth, '}', true)
	case c == '[':
		if depth >= maxDepth {
			return dst, errors.New("codec: JSON nested too deeply")
		}
		return p.container(dst, depth, ']', false)
	case c == '"':
		return p.str(dst)
	case c == 't':
		return p.literal(dst, "true", msgpcode.True)
	case c == 'f':
		return p.literal(dst, "false", msgpcode.False)
	case c == 'n':
		return p.literal(dst, "null", msgpcode.Nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(dst)
	}
	return dst, errBadJSON
}

func (p *jsonScanner) literal(dst []byte, word string, code byte) ([]byte, error) {
	if len(p.s)-p.i < len(word) || string(p.s[p.i:p.i+len(word)]) != word {
		return dst, errBadJSON
	}
	p.i += len(word)
	return append(dst, code), nil
}

// container encodes an object or array. The header is written once the
// entries are counted: five bytes are reserved, then the entries are moved
// down behind the header's real size.
func (p *jsonScanner) container(dst []byte, depth int, end byte, object bool) ([]byte, error) {
	p.i++ // { or [
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0)
	n := 0
	p.space()
	if p.i < len(p.s) && p.s[p.i] == end {
		p.i++
	} else {
		for {
			var err error
			if object {
				p.space()
				if p.i >= len(p.s) || p.s[p.i] != '"' {
					return dst, errBadJSON
				}
				if dst, err = p.str(dst); err != nil {
					return dst, err
				}
				p.space()
				if p.i >= len(p.s) || p.s[p.i] != ':' {
					return dst, errBadJSON
				}
				p.i++
			}
			p.space()
			if dst, err = p.value(dst, depth+1); err != nil {
				return dst, err
			}
			n++
			p.space()
			if p.i >= len(p.s) {
				return dst, errBadJSON
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.s[p.i] != end {
				return dst, errBadJSON
			}
			p.i++
			break
		}
	}
	var hdr [5]byte
	var h []byte
	if object {
		h = appendMapHeader(hdr[:0], n)
	} else {
		h = appendArrayHeader(hdr[:0], n)
	}
	copy(dst[start:], h)
	body := start + 5
	moved := copy(dst[start+len(h):], dst[body:])
	return dst[:start+len(h)+moved], nil
}

func appendArrayHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, msgpcode.FixedArrayLow|byte(n))
	case n <= math.MaxUint16:
		return append(dst, msgpcode.Array16, byte(n>>8), byte(n))
	default:
		return append(dst, msgpcode.Array32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// str encodes a JSON string. Plain strings are copied as they are; ones with
// escapes or invalid UTF-8 are decoded by encoding/json, which replaces
// invalid bytes with U+FFFD.
func (p *jsonScanner) str(dst []byte) ([]byte, error) {
	start := p.i
	p.i++
	plain := true
	for {
		if p.i >= len(p.s) {
			return dst, errBadJSON
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			raw := p.s[start+1 : p.i-1]
			if plain && utf8.Valid(raw) {
				return appendStrBytes(dst, raw), nil
			}
			var s string
			if err := json.Unmarshal(p.s[start:p.i], &s); err != nil {
				return dst, errBadJSON
			}
			return appendStr(dst, s), nil
		case c == '\\':
			plain = false
			p.i += 2
		case c < 0x20:
			return dst, errBadJSON
		default:
			p.i++
		}
	}
}

func appendStrBytes(dst, s []byte) []byte {
	return append(appendStrHeader(dst, len(s)), s...)
}

// number encodes a JSON number: an integer when it has no fraction or
// exponent and fits int64, else float64 (out of range is an error).
func (p *jsonScanner) number(dst []byte) ([]byte, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		p.digits()
	default:
		return dst, errBadJSON
	}
	integer := true
	if p.i < len(p.s) && p.s[p.i] == '.' {
		integer = false
		p.i++
		if !p.digits() {
			return dst, errBadJSON
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return dst, errBadJSON
		}
	}
	text := string(p.s[start:p.i])
	if integer {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return appendInt(dst, n), nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return dst, errBadJSON
	}
	b := math.Float64bits(f)
	return append(dst, msgpcode.Double, byte(b>>56), byte(b>>48), byte(b>>40), byte(b>>32),
		byte(b>>24), byte(b>>16), byte(b>>8), byte(b)), nil
}

func (p *jsonScanner) digits() bool {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}
