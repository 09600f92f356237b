package rpc

import (
	"context"
)

// Transport carries whole messages (WebSocket frames, or an in-memory pipe).
// Read must return when ctx is cancelled, or, for a transport that is also
// an io.Closer, when the Conn closes it as it ends. Write is called from one
// goroutine.
type Transport interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, frame []byte) error
}

// Parker is implemented by transports that can wait for the next message
// without a goroutine of their own (an event poller): between messages the
// reader asks Park to call resume once a read would not block, or once the
// transport is closed, and its goroutine returns. Park reports false when it
// cannot park now (bytes are already buffered, or the transport cannot be
// polled); the reader then reads as usual. An idle connection that parks
// costs no goroutine and no stack.
type Parker interface {
	Park(resume func()) bool
}

// Batcher is implemented by transports that can gather several frames into
// one write: the writer calls Cork before a batch and Uncork after it.
type Batcher interface {
	Cork()
	Uncork() error
}

// TryWriter is implemented by transports that can take a frame without the
// caller waiting: TryWrite writes frame when the transport is not still
// sending earlier bytes to a slow peer, and reports false (having written
// nothing) when it is. Several frames go out together. A frame with no writer running then goes out on the
// sender's goroutine, without a hand-off to a writer (a fan-out to many
// connections makes no goroutine switch per connection).
type TryWriter interface {
	TryWrite(frames []Out) (bool, error)
}

// Out is one message as a transport sends it, in one frame: Head, then Body, then Tail. Head
// and Tail are short (a notification's envelope, and what closes it), Body the rest. A Body
// that is Keep stays unchanged for as long as anyone holds it (an event's encoded body, shared
// by every connection that sends it): a transport that leaves part of a write for later may
// keep it where it is, and copies the rest of what it keeps. Nothing else is kept after the
// call returns.
type Out struct {
	Head, Body, Tail []byte
	Keep             bool
}

// FramesWriter is implemented by transports that send several messages in one vectored write,
// their bodies where they are: WriteFrames sends frames after what the transport holds, as much
// as the socket takes now, and keeps the rest, which the caller's Drain then sends and waits for
// (on the caller's goroutine). The writer uses it rather than Cork, Write and Uncork, and drains
// at once, as Uncork would wait: frames count as written once the peer has taken them.
type FramesWriter interface {
	Drainer
	WriteFrames(frames []Out) error
}

// Drainer is implemented by transports that send what they accepted in the background (what
// a TryWrite left): Busy reports whether some of it is still unsent, and Drain returns once it
// is sent, or with the error that ended the sending. The writer drains before it builds its
// next write or pulls more from its sources, so that a peer that stops reading holds at most
// what the transport accepted, not a further write waiting behind it.
type Drainer interface {
	Busy() bool
	Drain() error
}
