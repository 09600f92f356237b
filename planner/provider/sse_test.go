package provider

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func readAllEvents(r io.Reader) ([]sseEvent, error) {
	sr := newSSEReader(r)
	var out []sseEvent
	for {
		ev, err := sr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{"basic", "event: a\ndata: 1\n\n", []sseEvent{{"a", []byte("1")}}},
		{"data only", "data: x\n\ndata: y\n\n", []sseEvent{{"", []byte("x")}, {"", []byte("y")}}},
		{"multi-line data", "data: a\ndata: b\ndata:\n\n", []sseEvent{{"", []byte("a\nb\n")}}},
		{"crlf", "event: a\r\ndata: 1\r\n\r\n", []sseEvent{{"a", []byte("1")}}},
		{"cr", "event: a\rdata: 1\r\r", []sseEvent{{"a", []byte("1")}}},
		{"comments and ids", ": hi\nid: 7\nretry: 10\nevent: a\ndata: 1\n\n", []sseEvent{{"a", []byte("1")}}},
		{"only one space dropped", "data:  two\n\n", []sseEvent{{"", []byte(" two")}}},
		{"no colon", "data\n\n", []sseEvent{{"", []byte("")}}},
		{"event without data is dropped", "event: a\n\ndata: 1\n\n", []sseEvent{{"", []byte("1")}}},
		{"unterminated event dropped", "data: 1\n\ndata: 2\n", []sseEvent{{"", []byte("1")}}},
		{"bom", "\xef\xbb\xbfdata: 1\n\n", []sseEvent{{"", []byte("1")}}},
		{"colon in value", "data: {\"a\":\"b:c\"}\n\n", []sseEvent{{"", []byte(`{"a":"b:c"}`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				got, err := readAllEvents(r)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestSSEReaderLimits(t *testing.T) {
	long := "data: " + strings.Repeat("x", maxEventBytes+1) + "\n\n"
	if _, err := readAllEvents(strings.NewReader(long)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("long line: %v", err)
	}
	var many bytes.Buffer
	line := "data: " + strings.Repeat("y", 1<<20) + "\n"
	for range 5 {
		many.WriteString(line)
	}
	many.WriteString("\n")
	if _, err := readAllEvents(&many); !errors.Is(err, ErrMalformed) {
		t.Fatalf("large event: %v", err)
	}
	boom := errors.New("boom")
	if _, err := readAllEvents(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
}
