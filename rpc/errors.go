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

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// The error codes of the realtime API.
var (
	ErrParse           = &Error{Code: -32700, Message: "parse error"}
	ErrInvalidRequest  = &Error{Code: -32600, Message: "invalid request"}
	ErrMethodNotFound  = &Error{Code: -32601, Message: "method not found"}
	ErrInvalidParams   = &Error{Code: -32602, Message: "invalid params"}
	ErrInternal        = &Error{Code: -32603, Message: "internal error"}
	ErrUnauthenticated = &Error{Code: -32001, Message: "unauthenticated"}
	ErrForbidden       = &Error{Code: -32003, Message: "forbidden"}
	ErrNotFound        = &Error{Code: -32004, Message: "not found"}
	ErrConflict        = &Error{Code: -32009, Message: "conflict"}
	ErrResyncRequired  = &Error{Code: -32010, Message: "resync required"}
	// ErrLimitExceeded is an extension of the spec's codes, numbered like
	// HTTP's 429: a limit of the server was reached.
	ErrLimitExceeded = &Error{Code: -32029, Message: "limit exceeded"}
)

// ErrSkip, returned by Options.Admit, drops a frame without decoding it.
var ErrSkip = errors.New("rpc: frame skipped")

// ErrClosed is returned by calls on a connection that has ended.
var ErrClosed = errors.New("rpc: connection closed")

// Errorf returns an error with kind's code and a formatted message.
func Errorf(kind *Error, format string, args ...any) error {
	return &Error{Code: kind.Code, Message: fmt.Sprintf(format, args...)}
}

// Code returns the JSON-RPC code carried by err, or 0.
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// wireError converts a handler's error into what the peer sees. Internal
// errors and errors without a code become -32603 with no detail.
func wireError(err error) (e *Error, internal bool) {
	var re *Error
	if !errors.As(err, &re) || re.Code == ErrInternal.Code {
		return &Error{Code: ErrInternal.Code, Message: ErrInternal.Message}, true
	}
	msg := re.Message
	if err != error(re) {
		msg = err.Error()
	}
	return &Error{Code: re.Code, Message: msg, Data: re.Data}, false
}
