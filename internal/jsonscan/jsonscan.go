// Package jsonscan reads JSON text of a known shape without encoding/json, for the hot paths
// that decode the same few shapes many times a second (the planner's notes, the model's text
// deltas). A caller matches the literal parts it expects, takes strings and integers with
// String and Int, and falls back to encoding/json whenever they report false: they accept
// only what encoding/json reads the same way, and refuse the rest (invalid UTF-8, control
// characters, escaped surrogates, numbers that are not plain int64s) rather than guess.
package jsonscan

import (
	"math"
	"unicode/utf8"
)

// Text is what the scanner reads: a string or a byte slice. A string's values share its
// memory when they need no unescaping.
type Text interface{ ~string | ~[]byte }

// String reads the JSON string at the start of b and returns its value and what follows
// it. ok is false when b does not start with a string that encoding/json would decode to
// the same value.
func String[T Text](b T) (s string, rest T, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	var buf []byte // the value so far, once an escape was met; nil before
	start := 1     // of the raw run not yet copied into buf
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			raw := string(b[start:i])
			if !utf8.ValidString(raw) {
				return "", b, false // encoding/json replaces invalid bytes
			}
			if buf == nil {
				return raw, b[i+1:], true
			}
			return string(append(buf, raw...)), b[i+1:], true
		case c < 0x20:
			return "", b, false
		case c == '\\':
			if i+1 >= len(b) {
				return "", b, false
			}
			raw := string(b[start:i])
			if !utf8.ValidString(raw) {
				return "", b, false
			}
			buf = append(buf, raw...)
			e := b[i+1]
			i++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				if i+4 >= len(b) {
					return "", b, false
				}
				r, okHex := hex4(b[i+1], b[i+2], b[i+3], b[i+4])
				if !okHex || utf8.RuneLen(r) < 0 { // a surrogate: left to encoding/json
					return "", b, false
				}
				buf = utf8.AppendRune(buf, r)
				i += 4
			default:
				return "", b, false
			}
			start = i + 1
		}
	}
	return "", b, false
}

func hex4(a, b, c, d byte) (rune, bool) {
	var r rune
	for _, x := range [4]byte{a, b, c, d} {
		var v byte
		switch {
		case '0' <= x && x <= '9':
			v = x - '0'
		case 'a' <= x && x <= 'f':
			v = x - 'a' + 10
		case 'A' <= x && x <= 'F':
			v = x - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// Int reads the JSON integer at the start of b: an optional minus and digits without a
// leading zero, fitting an int64, and not followed by a fraction or exponent. ok is false
// otherwise.
func Int[T Text](b T) (n int64, rest T, ok bool) {
	i, neg := 0, false
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	start := i
	var u uint64
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		if u > (math.MaxInt64+1)/10 {
			return 0, b, false
		}
		u = u*10 + uint64(b[i]-'0')
		i++
	}
	switch {
	case i == start, b[start] == '0' && i > start+1:
		return 0, b, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return 0, b, false
	case !neg && u > math.MaxInt64, neg && u > math.MaxInt64+1:
		return 0, b, false
	}
	if neg {
		return -int64(u), b[i:], true
	}
	return int64(u), b[i:], true
}

// Skip reports whether b starts with lit, and returns what follows it.
func Skip[T Text](b T, lit string) (T, bool) {
	if len(b) < len(lit) || string(b[:len(lit)]) != lit {
		return b, false
	}
	return b[len(lit):], true
}

// Object reads the JSON object at the start of b, without spaces, calling value for each
// member with its key and what follows the key's colon: value reads the member's value and
// returns the key's bit (one bit a key the caller knows, 0 for a key it does not), what
// follows the value, and whether it read it. ok is false when value does, for an unknown
// or repeated key, or when b does not start with such an object.
func Object[T Text](b T, value func(key string, b T) (bit int, rest T, ok bool)) (rest T, ok bool) {
	if b, ok = Skip(b, "{"); !ok {
		return b, false
	}
	seen := 0
	for first := true; ; first = false {
		if rest, ok = Skip(b, "}"); ok {
			return rest, true
		}
		if !first {
			if b, ok = Skip(b, ","); !ok {
				return b, false
			}
		}
		var key string
		if key, b, ok = String(b); !ok {
			return b, false
		}
		if b, ok = Skip(b, ":"); !ok {
			return b, false
		}
		var bit int
		if bit, b, ok = value(key, b); bit == 0 || !ok || seen&bit != 0 {
			return b, false
		}
		seen |= bit
	}
}
