package protocol

import "strconv"

// Code is an error code of the realtime API's own. A Code is an error whose text is its
// name; it and an error of package rpc with the same code match each other with errors.Is,
// and rpc answers it, bare or wrapped, with its code.
type Code int

// The error codes of the realtime API beyond JSON-RPC's.
const (
	ErrUnauthenticated Code = -32001
	ErrForbidden       Code = -32003
	ErrNotFound        Code = -32004
	ErrConflict        Code = -32009
	ErrResyncRequired  Code = -32010
	// ErrLimitExceeded is numbered like HTTP's 429: a limit of the server was reached.
	ErrLimitExceeded Code = -32029
)

var codes = [...]struct {
	code Code
	name string
}{
	{ErrUnauthenticated, "unauthenticated"},
	{ErrForbidden, "forbidden"},
	{ErrNotFound, "not found"},
	{ErrConflict, "conflict"},
	{ErrResyncRequired, "resync required"},
	{ErrLimitExceeded, "limit exceeded"},
}

// Codes returns the API's own error codes.
func Codes() []Code {
	out := make([]Code, len(codes))
	for i, c := range codes {
		out[i] = c.code
	}
	return out
}

// Error returns the code's name ("not found"), the message of an error that has no other.
func (c Code) Error() string {
	for _, e := range codes {
		if e.code == c {
			return e.name
		}
	}
	return "error " + strconv.Itoa(int(c))
}

// ErrorCode returns the code as JSON-RPC carries it.
func (c Code) ErrorCode() int { return int(c) }

// Is reports whether target is an error of the same code, of any type that says its code.
func (c Code) Is(target error) bool {
	t, ok := target.(interface{ ErrorCode() int })
	return ok && t.ErrorCode() == int(c)
}
