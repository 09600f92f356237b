package presence

import (
	"github.com/ballet/gateway/codec"
)

// MethodChanged is the notification that carries a Notice.
const MethodChanged = "presence.changed"

// ChunkSize is the most subjects (joined and left together) one presence.changed carries: a
// longer change goes out as several notifications, one after the other.
const ChunkSize = 100

// Notice is one change of a stream's members, as a watcher hears it: the subjects that
// joined and those that left, each sorted. A watcher's first notice after Join is a
// snapshot: every member in Joined.
type Notice struct {
	Stream string
	Joined []string
	Left   []string

	bodies [2][][]byte
	err    [2]error
}

// wireNotice is the params of one presence.changed, without "subscription".
type wireNotice struct {
	Stream string        `json:"stream"`
	Joined []wireSubject `json:"joined"`
	Left   []wireSubject `json:"left"`
}

type wireSubject struct {
	Subject string `json:"subject"`
}

// Bodies returns the notice's presence.changed params (without "subscription", which the
// connection adds) encoded in c: one body per chunk of at most ChunkSize subjects, left
// before joined, at least one. Each codec's bodies are encoded once and shared by every
// watcher. Not safe for concurrent use: the registry calls sinks from one goroutine.
func (n *Notice) Bodies(c codec.Codec) ([][]byte, error) {
	i := 0
	if c.Binary() {
		i = 1
	}
	if n.bodies[i] == nil && n.err[i] == nil {
		n.bodies[i], n.err[i] = n.encode(c)
	}
	return n.bodies[i], n.err[i]
}

func (n *Notice) encode(c codec.Codec) ([][]byte, error) {
	left, joined := n.Left, n.Joined
	var out [][]byte
	for first := true; first || len(left)+len(joined) > 0; first = false {
		w := wireNotice{Stream: n.Stream, Joined: []wireSubject{}, Left: []wireSubject{}}
		room := ChunkSize
		for ; room > 0 && len(left) > 0; room-- {
			w.Left = append(w.Left, wireSubject{left[0]})
			left = left[1:]
		}
		for ; room > 0 && len(joined) > 0; room-- {
			w.Joined = append(w.Joined, wireSubject{joined[0]})
			joined = joined[1:]
		}
		b, err := c.Marshal(w)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
