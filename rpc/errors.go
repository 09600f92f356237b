package rpc

import (
	"errors"
	"fmt"
)

// Error is a JSON-RPC error with a code. Errors match by code through
// errors.Is, whatever their message.
type Error struct {
	Code    int
	Message string
	Data    any
}

func (e *Error) Error() string { return e.Message }

// ErrorCode returns e's code: an *Error is a Coded error.
func (e *Error) ErrorCode() int { return e.Code }

// Is reports whether target is a Coded error (an *Error or another) with the
// same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(Coded)
	return ok && t.ErrorCode() == e.Code
}

// Coded is an error that names its JSON-RPC code: an *Error, or a code of
// an API built on rpc (the realtime API's are package protocol's). A
// handler's Coded error, bare or wrapped, is answered with its code.
type Coded interface {
	error
	ErrorCode() int
}

// JSON-RPC's own error codes.
var (
	ErrParse          = &Error{Code: -32700, Message: "parse error"}
	ErrInvalidRequest = &Error{Code: -32600, Message: "invalid request"}
	ErrMethodNotFound = &Error{Code: -32601, Message: "method not found"}
	ErrInvalidParams  = &Error{Code: -32602, Message: "invalid params"}
	ErrInternal       = &Error{Code: -32603, Message: "internal error"}
)

// ErrSkip, returned by Options.Admit, drops a frame without decoding it.
var ErrSkip = errors.New("rpc: frame skipped")

// ErrClosed is returned by calls on a connection that has ended.
var ErrClosed = errors.New("rpc: connection closed")

// Errorf returns an error with kind's code and a formatted message.
func Errorf(kind Coded, format string, args ...any) error {
	return &Error{Code: kind.ErrorCode(), Message: fmt.Sprintf(format, args...)}
}

// Code returns the JSON-RPC code carried by err (its first Coded error), or 0.
func Code(err error) int {
	var c Coded
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return 0
}

// wireError converts a handler's error into what the peer sees. Internal
// errors and errors without a code become -32603 with no detail.
func wireError(err error) (e *Error, internal bool) {
	var c Coded
	if !errors.As(err, &c) || c.ErrorCode() == ErrInternal.Code {
		return &Error{Code: ErrInternal.Code, Message: ErrInternal.Message}, true
	}
	var data any
	if re, ok := c.(*Error); ok {
		data = re.Data
	}
	return &Error{Code: c.ErrorCode(), Message: err.Error(), Data: data}, false
}
