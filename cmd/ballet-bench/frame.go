package main

import (
	"bytes"
	"encoding/binary"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
)

// Reading stream.event frames cheaply: the gateway splices "subscription"
// in front of each event's params, and "seq" is the event's first field, so
// a frame usually starts with a fixed prefix, the subscription id and the
// seq. eventSeq reads those directly; any other frame (a reordered or
// unexpected encoding, a response, another notification) goes through the
// codec's full decoder. Both paths give the same answer for the same frame.

// frameKind says what a frame is, as far as the benchmark cares.
type frameKind uint8

const (
	frameOther     frameKind = iota // anything the benchmark ignores
	frameEvent                      // stream.event: sub and seq are set
	frameClosed                     // stream.closed: sub and reason are set
	frameResponse                   // a response: id, and err when it failed
	frameHeartbeat                  // $/heartbeat from the server
	frameOutput                     // planner.output: sub, turn, offset, outType and text are set
)

// frameInfo is what classify extracts from one frame.
type frameInfo struct {
	kind   frameKind
	sub    []byte // subscription id; aliases the frame on the fast path
	seq    int64
	reason string
	id     int64
	result []byte // raw result of a response, in the codec's format
	err    *codec.Error
	// planner.output
	turn    string
	offset  int64
	outType string
	text    string
}

var (
	msgpackEventPrefix = func() []byte {
		b, err := codec.MsgPack.Encode(nil, &codec.Message{Method: protocol.StreamEvent, Params: []byte{}})
		if err != nil {
			panic(err)
		}
		return b
	}()
	jsonEventPrefix = []byte(`{"jsonrpc":"2.0","method":"` + protocol.StreamEvent + `","params":{"subscription":"`)
)

// classify reads one frame of codec c into fi.
func classify(c codec.Codec, frame []byte, fi *frameInfo) error {
	*fi = frameInfo{}
	var ok bool
	if c.Binary() {
		ok = fastMsgpackEvent(frame, fi)
	} else {
		ok = fastJSONEvent(frame, fi)
	}
	if ok {
		fi.kind = frameEvent
		return nil
	}
	return slowClassify(c, frame, fi)
}

// fastMsgpackEvent recognises the gateway's encoding of stream.event:
// {"jsonrpc","method":"stream.event","params":{"subscription":S,"seq":N,...}}.
func fastMsgpackEvent(b []byte, fi *frameInfo) bool {
	if !bytes.HasPrefix(b, msgpackEventPrefix) {
		return false
	}
	b = b[len(msgpackEventPrefix):]
	if len(b) == 0 {
		return false
	}
	switch c := b[0]; {
	case c >= 0x80 && c <= 0x8f: // fixmap
		b = b[1:]
	case c == 0xde && len(b) >= 3: // map16
		b = b[3:]
	case c == 0xdf && len(b) >= 5: // map32
		b = b[5:]
	default:
		return false
	}
	key, b, ok := msgpackStr(b)
	if !ok || string(key) != "subscription" {
		return false
	}
	sub, b, ok := msgpackStr(b)
	if !ok {
		return false
	}
	key, b, ok = msgpackStr(b)
	if !ok || string(key) != "seq" {
		return false
	}
	seq, ok := msgpackInt(b)
	if !ok {
		return false
	}
	fi.sub, fi.seq = sub, seq
	return true
}

// msgpackStr reads a MessagePack string at the start of b.
func msgpackStr(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	var n, hdr int
	switch c := b[0]; {
	case c >= 0xa0 && c <= 0xbf:
		n, hdr = int(c&0x1f), 1
	case c == 0xd9 && len(b) >= 2:
		n, hdr = int(b[1]), 2
	case c == 0xda && len(b) >= 3:
		n, hdr = int(binary.BigEndian.Uint16(b[1:])), 3
	default:
		return nil, nil, false
	}
	if len(b) < hdr+n {
		return nil, nil, false
	}
	return b[hdr : hdr+n], b[hdr+n:], true
}

// msgpackInt reads a non-negative MessagePack integer at the start of b.
func msgpackInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	c := b[0]
	switch {
	case c <= 0x7f:
		return int64(c), true
	case c == 0xcc && len(b) >= 2:
		return int64(b[1]), true
	case c == 0xcd && len(b) >= 3:
		return int64(binary.BigEndian.Uint16(b[1:])), true
	case c == 0xce && len(b) >= 5:
		return int64(binary.BigEndian.Uint32(b[1:])), true
	case c == 0xcf && len(b) >= 9:
		v := binary.BigEndian.Uint64(b[1:])
		return int64(v), v <= 1<<63-1
	case c == 0xd0 && len(b) >= 2:
		v := int64(int8(b[1]))
		return v, v >= 0
	case c == 0xd1 && len(b) >= 3:
		v := int64(int16(binary.BigEndian.Uint16(b[1:])))
		return v, v >= 0
	case c == 0xd2 && len(b) >= 5:
		v := int64(int32(binary.BigEndian.Uint32(b[1:])))
		return v, v >= 0
	case c == 0xd3 && len(b) >= 9:
		v := int64(binary.BigEndian.Uint64(b[1:]))
		return v, v >= 0
	}
	return 0, false
}

// fastJSONEvent recognises the gateway's encoding of stream.event:
// {"jsonrpc":"2.0","method":"stream.event","params":{"subscription":"S","seq":N,...
// A subscription id with escapes takes the slow path.
func fastJSONEvent(b []byte, fi *frameInfo) bool {
	if !bytes.HasPrefix(b, jsonEventPrefix) {
		return false
	}
	b = b[len(jsonEventPrefix):]
	end := bytes.IndexByte(b, '"')
	if end < 0 || bytes.IndexByte(b[:end], '\\') >= 0 {
		return false
	}
	sub := b[:end]
	b = b[end+1:]
	const seqKey = `,"seq":`
	if !bytes.HasPrefix(b, []byte(seqKey)) {
		return false
	}
	b = b[len(seqKey):]
	var seq int64
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		if n >= 18 { // would overflow; let the full decoder judge
			return false
		}
		seq = seq*10 + int64(b[n]-'0')
		n++
	}
	if n == 0 || n == len(b) || (b[n] != ',' && b[n] != '}') || (n > 1 && b[0] == '0') {
		return false
	}
	fi.sub, fi.seq = sub, seq
	return true
}

// slowClassify decodes a frame with the codec.
func slowClassify(c codec.Codec, frame []byte, fi *frameInfo) error {
	var m codec.Message
	if err := c.Decode(frame, &m); err != nil {
		return err
	}
	if m.IsResponse() {
		fi.kind, fi.id, fi.result, fi.err = frameResponse, m.ID, m.Result, m.Error
		return nil
	}
	switch m.Method {
	case protocol.StreamEvent:
		var p struct {
			Subscription string `json:"subscription"`
			Seq          int64  `json:"seq"`
		}
		if err := c.Unmarshal(m.Params, &p); err != nil {
			return err
		}
		fi.kind, fi.sub, fi.seq = frameEvent, []byte(p.Subscription), p.Seq
	case protocol.StreamClosed:
		var p struct {
			Subscription string `json:"subscription"`
			Reason       string `json:"reason"`
		}
		if err := c.Unmarshal(m.Params, &p); err != nil {
			return err
		}
		fi.kind, fi.sub, fi.reason = frameClosed, []byte(p.Subscription), p.Reason
	case protocol.Heartbeat:
		fi.kind = frameHeartbeat
	case protocol.PlannerOutput:
		var p struct {
			Subscription string `json:"subscription"`
			Turn         string `json:"turn"`
			Offset       int64  `json:"offset"`
			Type         string `json:"type"`
			Text         string `json:"text"`
		}
		if err := c.Unmarshal(m.Params, &p); err != nil {
			return err
		}
		fi.kind, fi.sub, fi.turn, fi.offset, fi.outType, fi.text = frameOutput, []byte(p.Subscription), p.Turn, p.Offset, p.Type, p.Text
	}
	return nil
}
