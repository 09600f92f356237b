package wsnet

import (
	"slices"
	"sync"

	"github.com/ballet/gateway/rpc"
)

// The server's frames are framed here: each is final, unmasked and uncompressed (the
// connection never negotiates an extension), a data frame of the subprotocol's kind or a
// control frame (RFC 6455 §5.2), its header wsframe's. The rpc connection's frames go out with
// their headers in one vectored write, with no copy.

// gather is a pooled scratch for one vectored write of frames: their own bytes one after
// another in own (each frame's header and Head, the Tail of the one before), the pieces the
// write sends (own bytes, a Body, own bytes, …), whether each may be kept where it is if the
// write leaves it for later (keep), and the system call's state.
type gather struct {
	own   []byte
	parts [][]byte
	keep  []bool
	vectored
}

var gathers = sync.Pool{New: func() any {
	return &gather{own: make([]byte, 0, 64), parts: make([][]byte, 0, 16), keep: make([]bool, 0, 16)}
}}

// build makes g's pieces for frames and returns their bytes. A frame's Head and Tail are
// copied (they are short); its Body is a piece of its own, not copied.
func (g *gather) build(fr framing, frames []rpc.Out) int {
	need := 0
	for i := range frames {
		need += fr.maxOverhead() + len(frames[i].Head) + len(frames[i].Tail)
	}
	// Grown once, so that the pieces cut from it stay where they are.
	g.own = slices.Grow(g.own[:0], need)
	g.parts, g.keep = g.parts[:0], g.keep[:0]
	start, n := 0, 0
	for i := range frames {
		f := &frames[i]
		size := len(f.Head) + len(f.Body) + len(f.Tail)
		at := len(g.own)
		g.own = fr.appendHead(g.own, size)
		g.own = append(g.own, f.Head...)
		n += len(g.own) - at - len(f.Head) + size
		if len(f.Body) > 0 {
			g.parts = append(g.parts, g.own[start:len(g.own):len(g.own)], f.Body)
			g.keep = append(g.keep, false, f.Keep)
			start = len(g.own)
		}
		at = len(g.own)
		g.own = fr.appendTail(append(g.own, f.Tail...))
		n += len(g.own) - at - len(f.Tail)
	}
	if start < len(g.own) {
		g.parts = append(g.parts, g.own[start:len(g.own):len(g.own)])
		g.keep = append(g.keep, false)
	}
	return n
}

// rest is what is left of g's pieces after their first skip bytes, for a later write: the
// bodies that may be kept (of keepMin bytes or more), where they are; a copy of the rest, one
// after another in one buffer of their size, a piece for each run of them. Small bodies are
// copied: a reference costs the collector more than their bytes.
func (g *gather) rest(skip int) *pending {
	p := &pending{}
	copied := 0
	s := skip
	for i, part := range g.parts {
		if s >= len(part) {
			s -= len(part)
			continue
		}
		if !g.kept(i, len(part)-s) {
			copied += len(part) - s
		}
		s = 0
	}
	buf := make([]byte, 0, copied)
	run := -1 // the piece of p.parts that the copies now extend, -1 for none
	for i, part := range g.parts {
		if skip >= len(part) {
			skip -= len(part)
			continue
		}
		part = part[skip:]
		skip = 0
		p.n += len(part)
		if g.kept(i, len(part)) {
			p.parts = append(p.parts, part)
			run = -1
			continue
		}
		at := len(buf)
		buf = append(buf, part...)
		if run < 0 {
			run = len(p.parts)
			p.parts = append(p.parts, nil)
		}
		p.parts[run] = buf[at-len(p.parts[run]) : len(buf) : len(buf)]
	}
	return p
}

// keepMin is the smallest body a write left for later keeps by reference.
const keepMin = 512

// kept reports whether g's piece i, n bytes of which are left, is kept where it is.
func (g *gather) kept(i, n int) bool { return g.keep[i] && n >= keepMin }

func (g *gather) put() {
	clear(g.parts) // holds no frame
	if cap(g.own) <= 16<<10 && cap(g.parts) <= 2*maxGatherParts {
		gathers.Put(g)
	}
}

// maxGatherFrames is the most frames one vectored write sends (up to two pieces each, and one
// more), and maxGatherParts the most pieces: Linux takes up to 1024.
const (
	maxGatherFrames = 256
	maxGatherParts  = 2*maxGatherFrames + 1
)
