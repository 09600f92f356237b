package codec

import "github.com/vmihailenco/msgpack/v5/msgpcode"

// maxDepth bounds the nesting of decoded values, as encoding/json does, so
// hostile input cannot exhaust the stack.
const maxDepth = 1000

// validMsgpack reports whether b holds exactly one well-formed MessagePack
// value nested at most maxDepth deep. It walks the bytes without recursion.
func validMsgpack(b []byte) bool {
	// pending counts the values still to read at each open container level.
	pending := make([]int, 1, 16)
	pending[0] = 1
	i := 0
	for len(pending) > 0 {
		top := len(pending) - 1
		if pending[top] == 0 {
			pending = pending[:top]
			continue
		}
		pending[top]--
		if i >= len(b) {
			return false
		}
		c := b[i]
		i++
		var skip, children int
		switch {
		case c <= msgpcode.PosFixedNumHigh, c >= msgpcode.NegFixedNumLow:
		case msgpcode.IsFixedMap(c):
			children = 2 * int(c&0x0f)
		case msgpcode.IsFixedArray(c):
			children = int(c & 0x0f)
		case msgpcode.IsFixedString(c):
			skip = int(c & 0x1f)
		default:
			switch c {
			case msgpcode.Nil, msgpcode.False, msgpcode.True:
			case msgpcode.Uint8, msgpcode.Int8:
				skip = 1
			case msgpcode.Uint16, msgpcode.Int16:
				skip = 2
			case msgpcode.Uint32, msgpcode.Int32, msgpcode.Float:
				skip = 4
			case msgpcode.Uint64, msgpcode.Int64, msgpcode.Double:
				skip = 8
			case msgpcode.FixExt1:
				skip = 2
			case msgpcode.FixExt2:
				skip = 3
			case msgpcode.FixExt4:
				skip = 5
			case msgpcode.FixExt8:
				skip = 9
			case msgpcode.FixExt16:
				skip = 17
			case msgpcode.Str8, msgpcode.Bin8:
				n, ok := readLen(b, &i, 1)
				if !ok {
					return false
				}
				skip = n
			case msgpcode.Str16, msgpcode.Bin16:
				n, ok := readLen(b, &i, 2)
				if !ok {
					return false
				}
				skip = n
			case msgpcode.Str32, msgpcode.Bin32:
				n, ok := readLen(b, &i, 4)
				if !ok {
					return false
				}
				skip = n
			case msgpcode.Ext8:
				n, ok := readLen(b, &i, 1)
				if !ok {
					return false
				}
				skip = n + 1
			case msgpcode.Ext16:
				n, ok := readLen(b, &i, 2)
				if !ok {
					return false
				}
				skip = n + 1
			case msgpcode.Ext32:
				n, ok := readLen(b, &i, 4)
				if !ok {
					return false
				}
				skip = n + 1
			case msgpcode.Array16, msgpcode.Map16:
				n, ok := readLen(b, &i, 2)
				if !ok {
					return false
				}
				children = n
				if c == msgpcode.Map16 {
					children *= 2
				}
			case msgpcode.Array32, msgpcode.Map32:
				n, ok := readLen(b, &i, 4)
				if !ok {
					return false
				}
				children = n
				if c == msgpcode.Map32 {
					children *= 2
				}
			default: // 0xc1, never used
				return false
			}
		}
		if skip > len(b)-i {
			return false
		}
		i += skip
		if children > 0 {
			// Each child needs at least one byte: reject impossible counts early.
			if children > len(b)-i {
				return false
			}
			if len(pending) > maxDepth {
				return false
			}
			pending = append(pending, children)
		}
	}
	return i == len(b)
}

func readLen(b []byte, i *int, size int) (int, bool) {
	if len(b)-*i < size {
		return 0, false
	}
	n := 0
	for k := 0; k < size; k++ {
		n = n<<8 | int(b[*i+k])
	}
	*i += size
	return n, true
}
