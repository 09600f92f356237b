package wsframe

import "encoding/binary"

// Mask masks p with key, or unmasks it: the same operation (RFC 6455 §5.3). p is the whole
// payload, its first byte the first the key applies to. Eight bytes are done at a time.
func Mask(p []byte, key [4]byte) {
	if len(p) >= 8 {
		k := uint64(binary.LittleEndian.Uint32(key[:]))
		k |= k << 32
		for len(p) >= 8 {
			binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)^k)
			p = p[8:]
		}
	}
	for i := range p {
		p[i] ^= key[i&3]
	}
}
