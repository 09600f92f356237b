package wsframe

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// The close frame's payload (RFC 6455 §5.5.1): none, or a two-byte code and a UTF-8 reason.

// Close codes that are never sent in a close frame (RFC 6455 §7.4.1): what a side reports when
// the close frame had no code, or when there was no close frame.
const (
	CodeNoStatus = 1005
	CodeAbnormal = 1006
)

// The errors of ParseClose. Their texts are the reasons a server gives as it closes a
// connection over a close frame it refuses, so they carry no package prefix.
var (
	ErrCloseShort  = errors.New("close frame of one byte")
	ErrCloseCode   = errors.New("close code that may not be sent")
	ErrCloseReason = errors.New("close reason that is not UTF-8") // 1007 (RFC 6455 §8.1)
)

// SendableCode reports whether code may be in a close frame (RFC 6455 §7.4): 1000–1003 and
// 1007–1014 of the registered codes, and 3000–4999.
func SendableCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	}
	return code >= 3000 && code <= 4999
}

// ParseClose is the code and reason of a close frame's payload p: CodeNoStatus for an empty
// one. A code that may not be sent is ErrCloseCode, a reason that is not UTF-8 ErrCloseReason.
func ParseClose(p []byte) (code int, reason string, err error) {
	switch len(p) {
	case 0:
		return CodeNoStatus, "", nil
	case 1:
		return 0, "", ErrCloseShort
	}
	code = int(binary.BigEndian.Uint16(p))
	if !SendableCode(code) {
		return 0, "", ErrCloseCode
	}
	if !utf8.Valid(p[2:]) {
		return 0, "", ErrCloseReason
	}
	return code, string(p[2:]), nil
}

// ClosePayload is a close frame's payload for code and reason: empty for a code that may not
// be sent (CodeNoStatus, CodeAbnormal), and a reason cut, at a character's end, to what a
// control frame holds.
func ClosePayload(code int, reason string) []byte {
	if !SendableCode(code) {
		return nil
	}
	for len(reason) > MaxControlPayload-2 {
		_, n := utf8.DecodeLastRuneInString(reason)
		reason = reason[:len(reason)-n]
	}
	p := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reason)), uint16(code))
	return append(p, reason...)
}
