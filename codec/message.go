package codec

import (
	"errors"
	"fmt"
)

// Subprotocol names.
const (
	NameMsgPack = "ballet.v1.msgpack"
	NameJSON    = "ballet.v1.json"
)

// JSON-RPC 2.0 error codes used by the decoders.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
)

// Message is one JSON-RPC 2.0 envelope: a request (Method and ID), a
// notification (Method, no ID) or a response (no Method; Result or Error).
type Message struct {
	ID     int64
	HasID  bool   // false for notifications and for responses with a null id
	Method string // empty for responses
	Params []byte // raw, in the codec's format; nil when absent
	Result []byte // raw, in the codec's format; nil when absent
	Error  *Error
}

// IsRequest reports whether m is a request (method and id).
func (m *Message) IsRequest() bool { return m.Method != "" && m.HasID }

// IsNotification reports whether m is a notification (method, no id).
func (m *Message) IsNotification() bool { return m.Method != "" && !m.HasID }

// IsResponse reports whether m is a response.
func (m *Message) IsResponse() bool { return m.Method == "" }

// Error is the error object of a JSON-RPC response.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []byte `json:"-"` // raw, in the codec's format; nil when absent
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// DecodeError is returned by Decode for input that is not a valid envelope.
// Code is CodeParseError or CodeInvalidRequest; ID is set when the envelope
// had a usable integer id, so the error response can carry it.
type DecodeError struct {
	Code  int
	Msg   string
	ID    int64
	HasID bool
}

func (e *DecodeError) Error() string { return "codec: " + e.Msg }

// ErrNotObject is returned by Splice when the body is not an encoded object.
var ErrNotObject = errors.New("codec: body is not an encoded object")

func parseErr(format string, a ...any) *DecodeError {
	return &DecodeError{Code: CodeParseError, Msg: fmt.Sprintf(format, a...)}
}

func invalidReq(format string, a ...any) *DecodeError {
	return &DecodeError{Code: CodeInvalidRequest, Msg: fmt.Sprintf(format, a...)}
}

// envelope is the decoded but unchecked form shared by both decoders.
type envelope struct {
	version    string
	hasVersion bool
	id         int64
	idState    idState
	method     string
	hasMethod  bool
	params     []byte
	result     []byte
	errRaw     []byte
}

type idState uint8

const (
	idAbsent idState = iota
	idNull
	idInt
	idBad // present but not an integer
)

// check validates the envelope shape and fills m.
func (e *envelope) check(c errorDecoder, m *Message) error {
	*m = Message{}
	fail := e.fail
	if e.idState == idBad {
		return invalidReq("id must be an integer")
	}
	if !e.hasVersion || e.version != "2.0" {
		return fail(`"jsonrpc" must be "2.0"`)
	}
	if e.idState == idInt {
		m.ID, m.HasID = e.id, true
	}
	if e.hasMethod {
		if e.result != nil || e.errRaw != nil {
			return fail("a request must not carry result or error")
		}
		if e.method == "" {
			return fail("method must not be empty")
		}
		if e.idState == idNull {
			return invalidReq("request id must be an integer, not null")
		}
		m.Method = e.method
		m.Params = e.params
		return nil
	}
	if e.params != nil {
		return fail("method is missing")
	}
	if e.idState == idAbsent {
		return invalidReq("method is missing")
	}
	if (e.result == nil) == (e.errRaw == nil) {
		return fail("a response must carry exactly one of result and error")
	}
	m.Result = e.result
	if e.errRaw != nil {
		we, err := c.decodeError(e.errRaw)
		if err != nil {
			return fail("error must be an object with integer code and string message")
		}
		m.Error = we
	}
	return nil
}

type errorDecoder interface {
	decodeError(raw []byte) (*Error, error)
}
