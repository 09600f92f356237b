package tracker

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// The last id's time and counter, so that ids made by this process strictly increase even
// within one millisecond or when the clock steps back (RFC 9562, method 1: a 12-bit counter
// in rand_a, started at a random value in its lower half).
var idState struct {
	sync.Mutex
	ms      uint64
	counter uint16
}

// NewID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, a 12-bit counter and 62
// random bits. Ids from one process sort in creation order.
func NewID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[8:]) // never fails (crypto/rand panics instead)
	var seed [2]byte
	_, _ = rand.Read(seed[:])

	ms := uint64(now.UnixMilli())
	idState.Lock()
	if ms <= idState.ms {
		ms = idState.ms
		idState.counter++
		if idState.counter > 0xfff {
			ms++
			idState.counter = binary.BigEndian.Uint16(seed[:]) & 0x7ff
		}
	} else {
		idState.counter = binary.BigEndian.Uint16(seed[:]) & 0x7ff
	}
	idState.ms = ms
	counter := idState.counter
	idState.Unlock()

	b[0], b[1], b[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	b[3], b[4], b[5] = byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = 0x70 | byte(counter>>8) // version 7
	b[7] = byte(counter)
	b[8] = b[8]&0x3f | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
