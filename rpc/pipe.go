package rpc

import (
	"context"
	"errors"
	"sync"
)

// ErrPipeClosed is returned by a pipe end after either end was closed.
var ErrPipeClosed = errors.New("rpc: pipe closed")

// PipeEnd is one end of an in-memory message pipe, a Transport for tests and
// in-process peers.
type PipeEnd struct {
	in, out chan []byte
	done    chan struct{}
	once    *sync.Once
}

// NewPipe returns two connected ends; each holds up to buffer messages in
// flight per direction.
func NewPipe(buffer int) (*PipeEnd, *PipeEnd) {
	ab, ba := make(chan []byte, buffer), make(chan []byte, buffer)
	done, once := make(chan struct{}), &sync.Once{}
	return &PipeEnd{in: ba, out: ab, done: done, once: once}, &PipeEnd{in: ab, out: ba, done: done, once: once}
}

// Read returns the next message from the other end.
func (p *PipeEnd) Read(ctx context.Context) ([]byte, error) {
	select {
	case m := <-p.in:
		return m, nil
	case <-p.done:
		return nil, ErrPipeClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write sends a copy of frame to the other end.
func (p *PipeEnd) Write(ctx context.Context, frame []byte) error {
	select {
	case p.out <- append([]byte(nil), frame...):
		return nil
	case <-p.done:
		return ErrPipeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes both ends.
func (p *PipeEnd) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}
