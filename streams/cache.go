package streams

import (
	"sync"

	"github.com/ballet/gateway/codec"
)

// bodyCacheSize is how many recent events keep their encoded bodies, so
// that replays (a reconnect storm replays the same recent events to many
// clients) encode each event once per codec rather than once per client.
const bodyCacheSize = 8192

// bodyCache keeps the encoded bodies of recent events by seq, in a ring.
type bodyCache struct {
	mu    sync.Mutex
	slots [bodyCacheSize]cachedBody
	// bytes is what the cached bodies take, at most maxBytes: a body that does not fit is
	// not cached (it is encoded again when asked for). NewHub sets maxBytes to
	// HubOptions.RecentBytes.
	bytes, maxBytes int
}

func (bc *bodyCache) heldBytes() int {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	return bc.bytes
}

type cachedBody struct {
	seq  int64
	at   int64  // occurred_at, Unix ns: with the entity, guards against a reset database reusing seqs
	id   string // entity_id
	body [2][]byte
}

func codecIndex(c codec.Codec) int {
	if c.Binary() {
		return 1
	}
	return 0
}

func (bc *bodyCache) get(ev *Event, c codec.Codec) []byte {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	s := &bc.slots[ev.Seq%bodyCacheSize]
	if s.seq != ev.Seq || s.at != ev.OccurredAt.UnixNano() || s.id != ev.EntityID {
		return nil
	}
	return s.body[codecIndex(c)]
}

func (bc *bodyCache) put(ev *Event, c codec.Codec, body []byte) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	s := &bc.slots[ev.Seq%bodyCacheSize]
	if s.seq != ev.Seq || s.at != ev.OccurredAt.UnixNano() || s.id != ev.EntityID {
		bc.bytes -= len(s.body[0]) + len(s.body[1])
		*s = cachedBody{seq: ev.Seq, at: ev.OccurredAt.UnixNano(), id: ev.EntityID}
	}
	i := codecIndex(c)
	if bc.bytes-len(s.body[i])+len(body) > bc.maxBytes {
		return
	}
	bc.bytes += len(body) - len(s.body[i])
	s.body[i] = body
}

// body returns ev's encoded body in c, from the cache or freshly encoded.
func (bc *bodyCache) body(p *Prepared, c codec.Codec) ([]byte, error) {
	i := codecIndex(c)
	if p.body[i] != nil || p.err[i] != nil {
		return p.body[i], p.err[i]
	}
	if b := bc.get(p.Event, c); b != nil {
		p.body[i] = b
		return b, nil
	}
	b, err := p.Body(c)
	if err == nil {
		bc.put(p.Event, c, b)
	}
	return b, err
}
