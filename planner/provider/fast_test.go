package provider

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzAnthropicFast checks the fast path of text deltas against encoding/json: a stream
// decodes to the same deltas, response and error either way.
func FuzzAnthropicFast(f *testing.F) {
	f.Add(strings.Join(aHelloStream(), ""))
	f.Add(aev("message_start", `{"type":"message_start","message":{}}`) + aTextStart(0) +
		aTextDelta(0, "a \"b\"\n\u00e9\\u00e9") + aTextDelta(1, "x") + aBlockStop(0) + aTextDelta(0, "late"))
	f.Add(aTextDelta(0, "before start"))
	f.Add(aev("message_start", `{"type":"message_start","message":{}}`) + aToolStart(0, "tu", "list") +
		aTextDelta(0, "to a tool") + aev("content_block_delta", `{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":""}}`))
	f.Add(aev("content_block_delta", `{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"\ud83d"}}`))
	f.Fuzz(func(t *testing.T, stream string) {
		decode := func(d *anthropicDecoder) ([]Delta, *Response, string) {
			var deltas []Delta
			resp, err := d.decode(strings.NewReader(stream), func(x Delta) error {
				deltas = append(deltas, x)
				return nil
			})
			return deltas, resp, fmt.Sprint(err)
		}
		fastD, fastR, fastE := decode(newAnthropicDecoder())
		slow := newAnthropicDecoder()
		slow.noFast = true
		slowD, slowR, slowE := decode(slow)
		if !reflect.DeepEqual(fastD, slowD) || !reflect.DeepEqual(fastR, slowR) || fastE != slowE {
			t.Fatalf("fast %q %+v %s, encoding/json %q %+v %s", fastD, fastR, fastE, slowD, slowR, slowE)
		}
	})
}

// readLineBytewise is the reader's line splitting done one byte at a time, as the
// reference of readLine.
func readLineBytewise(r *bufio.Reader, line []byte, skipLF *bool) ([]byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		if *skipLF {
			*skipLF = false
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\n':
			return line, nil
		case '\r':
			*skipLF = true
			return line, nil
		}
		if len(line) >= maxEventBytes {
			return nil, malformed("line longer than %d bytes", maxEventBytes)
		}
		line = append(line, c)
	}
}

// FuzzSSELines checks readLine against reading byte by byte, however the input arrives.
func FuzzSSELines(f *testing.F) {
	for _, s := range []string{"a\nb\r\nc\rd\r\r\n\n", "\r", "\n\r\n", "x", "event: a\ndata: 1\n\n", "\xef\xbb\xbfdata: x\r\n\r\n"} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		var in io.Reader = bytes.NewReader(data)
		if mode%2 == 1 {
			in = iotest.OneByteReader(in)
		}
		sr := newSSEReader(in)
		ref := bufio.NewReader(bytes.NewReader(data))
		skipLF := false
		for {
			got, gotErr := sr.readLine()
			want, wantErr := readLineBytewise(ref, nil, &skipLF)
			if !bytes.Equal(got, want) || !errors.Is(gotErr, wantErr) && fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("line %q %v, byte by byte %q %v", got, gotErr, want, wantErr)
			}
			if gotErr != nil {
				return
			}
		}
	})
}

// BenchmarkAnthropicStream measures decoding a stream of text deltas as the API writes
// them, per delta.
func BenchmarkAnthropicStream(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(aev("message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10}}}`) + aTextStart(0))
	const n = 1000
	for i := range n {
		sb.WriteString(aTextDelta(0, fmt.Sprintf("delta %d of the model's answer, forty b", i)))
	}
	sb.WriteString(aBlockStop(0) + aMessageDelta("end_turn", n) + aev("message_stop", `{"type":"message_stop"}`))
	stream := sb.String()
	for _, fast := range []bool{true, false} {
		b.Run(fmt.Sprintf("fast=%v", fast), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				d := newAnthropicDecoder()
				d.noFast = !fast
				if _, err := d.decode(strings.NewReader(stream), func(Delta) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delta")
		})
	}
}
