package provider

import (
	"bufio"
	"bytes"
	"io"
)

// maxEventBytes bounds one server-sent event (a line, or the data lines of one event).
const maxEventBytes = 4 << 20

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	Event string // the event: field, "" when absent
	Data  []byte // data: lines joined with "\n"
}

// sseReader splits a text/event-stream body into events following the WHATWG
// rules: lines end in CRLF, LF or CR; a blank line dispatches; lines starting with
// ':' are comments; one space after the field's colon is dropped; several data
// lines join with "\n"; an event that lacks a blank line at the end of the stream
// is discarded. Work is linear in the input however it is split into reads.
type sseReader struct {
	r         *bufio.Reader
	line      []byte
	skipLF    bool // the last line ended in CR: a following LF belongs to it
	event     string
	data      []byte
	hasData   bool
	firstLine bool
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReader(r), firstLine: true}
}

// Next returns the next event, io.EOF at a clean end of the stream, an error wrapping
// ErrMalformed for an oversized line or event, or the body's read error.
func (r *sseReader) Next() (sseEvent, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if r.firstLine {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
			r.firstLine = false
		}
		if len(line) == 0 {
			if !r.hasData {
				r.event = ""
				continue
			}
			ev := sseEvent{Event: r.event, Data: r.data}
			r.event, r.data, r.hasData = "", nil, false
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			r.event = eventName(value)
		case "data":
			if len(r.data)+len(value)+1 > maxEventBytes {
				return sseEvent{}, malformed("event larger than %d bytes", maxEventBytes)
			}
			if r.hasData {
				r.data = append(r.data, '\n')
			} else {
				r.data = make([]byte, 0, len(value))
			}
			r.data = append(r.data, value...)
			r.hasData = true
		}
		// id, retry and unknown fields do not matter to a one-shot stream.
	}
}

// readLine returns the next line without its end. The slice is valid until the next
// call. A last line without an end is dropped: it could not complete an event. It takes
// the buffered bytes up to the line's end at once, not byte by byte.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		buf, err := r.r.Peek(max(r.r.Buffered(), 1))
		if len(buf) == 0 {
			return nil, err
		}
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		n := i
		if i < 0 {
			n = len(buf)
		}
		if len(r.line)+n > maxEventBytes {
			return nil, malformed("line longer than %d bytes", maxEventBytes)
		}
		r.line = append(r.line, buf[:n]...)
		if i < 0 {
			_, _ = r.r.Discard(n)
			continue
		}
		r.skipLF = buf[i] == '\r'
		_, _ = r.r.Discard(i + 1)
		return r.line, nil
	}
}

// eventName is the event field's value, without allocating for the Messages API's names.
func eventName(v []byte) string {
	switch string(v) {
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_start":
		return "content_block_start"
	case "content_block_stop":
		return "content_block_stop"
	case "ping":
		return "ping"
	}
	return string(v)
}
