package rpc

import (
	"context"

	"github.com/ballet/gateway/codec"
)

// hookFuncs is Hooks made of functions, for tests; a nil one does what NoHooks does.
type hookFuncs struct {
	inline func(method string) bool
	admit  func(ctx context.Context) error
	screen func(m *codec.Message, err *codec.DecodeError) bool
	done   func(err error)
	over   func()
}

func (h *hookFuncs) Inline(method string) bool {
	return h.inline != nil && h.inline(method)
}

func (h *hookFuncs) OnMessage() {}

func (h *hookFuncs) Admit(ctx context.Context) error {
	if h.admit == nil {
		return nil
	}
	return h.admit(ctx)
}

func (h *hookFuncs) Screen(m *codec.Message, err *codec.DecodeError) bool {
	return h.screen == nil || h.screen(m, err)
}

func (h *hookFuncs) OnDone(err error) {
	if h.done != nil {
		h.done(err)
	}
}

func (h *hookFuncs) OnOverflow() {
	if h.over != nil {
		h.over()
	}
}
