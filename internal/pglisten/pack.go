package pglisten

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// fragmentMark starts the line that announces a fragment: "\x1f<id> <index> <count>".
const fragmentMark = '\x1f'

// Limits of reassembly: a fragmented item has at most maxFragments pieces (about 28 MB);
// at most maxPartial items are being put together at once, each for at most partialAge.
const (
	maxFragments = 4096
	maxPartial   = 64
	partialAge   = time.Minute
)

// ErrItem is the error of Pack for an item it cannot carry: one with a line break, one that
// starts with the fragment mark (\x1f), or one longer than maxFragments pieces.
var ErrItem = errors.New("pglisten: item cannot be packed")

// Pack puts items, in order, into as few payloads of at most MaxPayload bytes as it can, for
// Notify: each payload is head, then its items, each after a line break. An item too long to
// fit a payload alone is cut into fragments, each in a payload of its own (head, the line
// \x1f<id> <index> <count>, then the piece), cut between UTF-8 characters, since Postgres
// takes text only. Unpacker puts them together again. head must not hold a line break.
func Pack(head string, items []string) ([]string, error) {
	var payloads []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			payloads = append(payloads, b.String())
			b.Reset()
		}
	}
	for _, it := range items {
		if strings.IndexByte(it, '\n') >= 0 || (it != "" && it[0] == fragmentMark) {
			return nil, fmt.Errorf("%w: %.40q", ErrItem, it)
		}
		if len(head)+1+len(it) > MaxPayload {
			flush()
			frags, err := fragments(head, it)
			if err != nil {
				return nil, err
			}
			payloads = append(payloads, frags...)
			continue
		}
		if b.Len() > 0 && b.Len()+1+len(it) > MaxPayload {
			flush()
		}
		if b.Len() == 0 {
			b.WriteString(head)
		}
		b.WriteByte('\n')
		b.WriteString(it)
	}
	flush()
	return payloads, nil
}

// fragments cuts a long item into payloads of their own.
func fragments(head, it string) ([]string, error) {
	var id [12]byte
	_, _ = crand.Read(id[:])
	ids := hex.EncodeToString(id[:])
	// The announcing line takes at most 1 + 24 + 2×5 bytes; the rest is the piece.
	room := MaxPayload - len(head) - 2 - (1 + len(ids) + 2*6)
	var pieces []string
	for len(it) > 0 {
		n := min(room, len(it))
		for n < len(it) && n > 0 && !utf8.RuneStart(it[n]) {
			n--
		}
		pieces, it = append(pieces, it[:n]), it[n:]
	}
	if len(pieces) > maxFragments {
		return nil, fmt.Errorf("%w: an item of %d pieces", ErrItem, len(pieces))
	}
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = fmt.Sprintf("%s\n%c%s %d %d\n%s", head, fragmentMark, ids, i, len(pieces), p)
	}
	return out, nil
}

// Unpacker reads the payloads Pack made, putting fragmented items together again. It is not
// safe for concurrent use: a listener's OnNotify and OnReconnect, which run on one goroutine,
// use it.
type Unpacker struct {
	partial map[string]*partial
}

type partial struct {
	pieces  []string
	got     int
	started time.Time
}

// Unpack returns the head of a payload and its items: none while a fragmented item is still
// incomplete, the whole item with its last piece. A payload Pack cannot have made is an error.
func (u *Unpacker) Unpack(payload string, now time.Time) (head string, items []string, err error) {
	head, rest, _ := strings.Cut(payload, "\n")
	if rest == "" || rest[0] != fragmentMark {
		if rest == "" {
			return head, nil, nil
		}
		return head, strings.Split(rest, "\n"), nil
	}
	line, piece, _ := strings.Cut(rest[1:], "\n")
	f := strings.Fields(line)
	if len(f) != 3 {
		return head, nil, fmt.Errorf("pglisten: malformed fragment %.40q", line)
	}
	i, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || n < 1 || n > maxFragments || i < 0 || i >= n {
		return head, nil, fmt.Errorf("pglisten: fragment %q of %q", f[1], f[2])
	}
	if u.partial == nil {
		u.partial = map[string]*partial{}
	}
	p := u.partial[f[0]]
	if p == nil {
		u.prune(now)
		p = &partial{pieces: make([]string, n), started: now}
		u.partial[f[0]] = p
	}
	if len(p.pieces) != n {
		delete(u.partial, f[0])
		return head, nil, errors.New("pglisten: fragments disagree on their count")
	}
	if p.pieces[i] == "" {
		p.got++
	}
	p.pieces[i] = piece
	if p.got < n {
		return head, nil, nil
	}
	delete(u.partial, f[0])
	return head, []string{strings.Join(p.pieces, "")}, nil
}

// Reset drops the items being put together: after a reconnect, their missing pieces are gone.
func (u *Unpacker) Reset() { clear(u.partial) }

// prune drops incomplete items that are too old, then the oldest while there are too many.
func (u *Unpacker) prune(now time.Time) {
	for id, p := range u.partial {
		if now.Sub(p.started) > partialAge {
			delete(u.partial, id)
		}
	}
	for len(u.partial) >= maxPartial {
		var oldest string
		for id, p := range u.partial {
			if oldest == "" || p.started.Before(u.partial[oldest].started) {
				oldest = id
			}
		}
		delete(u.partial, oldest)
	}
}
