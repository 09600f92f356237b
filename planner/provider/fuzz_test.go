package provider

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"testing/iotest"
)

// FuzzSSE checks that the SSE reader never panics and splits events the same way
// however the bytes arrive.
func FuzzSSE(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		whole, errWhole := readAllEvents(bytes.NewReader(data))
		bytewise, errBytewise := readAllEvents(iotest.OneByteReader(bytes.NewReader(data)))
		if (errWhole == nil) != (errBytewise == nil) || !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("framing depends on reads: %q/%v vs %q/%v", whole, errWhole, bytewise, errBytewise)
		}
		if errWhole != nil && !errors.Is(errWhole, ErrMalformed) {
			t.Fatalf("unexpected error %v", errWhole)
		}
		for _, ev := range whole {
			if len(ev.Data) > maxEventBytes || bytes.ContainsAny([]byte(ev.Event), "\r\n") {
				t.Fatalf("bad event %q", ev)
			}
		}
	})
}

// checkDecoded holds for any stream a decoder accepted or refused.
func checkDecoded(t *testing.T, resp *Response, err error, deltas []Delta) {
	t.Helper()
	var pe *Error
	if err != nil {
		if resp != nil {
			t.Fatal("response with an error")
		}
		if !errors.Is(err, ErrMalformed) && !errors.As(err, &pe) {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	var text, respText, calls, respCalls int
	for _, d := range deltas {
		switch d.Type {
		case DeltaText:
			text += len(d.Text)
		case DeltaToolCall:
			calls++
			if _, e := objectOrEmpty(d.Input); e != nil || len(d.Input) == 0 {
				t.Fatalf("tool call input %q", d.Input)
			}
		default:
			t.Fatalf("delta type %q", d.Type)
		}
	}
	for _, b := range resp.Content {
		switch b.Type {
		case BlockText:
			respText += len(b.Text)
		case BlockToolUse:
			respCalls++
		}
	}
	if text != respText || calls != respCalls {
		t.Fatalf("deltas (%d bytes, %d calls) disagree with the response (%d bytes, %d calls)", text, calls, respText, respCalls)
	}
}

func FuzzAnthropicEvents(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var deltas []Delta
		resp, err := decodeAnthropic(bytes.NewReader(data), func(d Delta) error {
			deltas = append(deltas, d)
			return nil
		})
		checkDecoded(t, resp, err, deltas)
	})
}

func FuzzOpenAIChunks(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var deltas []Delta
		resp, err := decodeOpenAI(bytes.NewReader(data), func(d Delta) error {
			deltas = append(deltas, d)
			return nil
		})
		checkDecoded(t, resp, err, deltas)
		if err == nil {
			var text bytes.Buffer
			for _, d := range deltas {
				text.WriteString(d.Text)
			}
			if got := ""; len(resp.Content) > 0 && resp.Content[0].Type == BlockText {
				got = resp.Content[0].Text
				if got != text.String() {
					t.Fatalf("text %q vs deltas %q", got, text.String())
				}
			}
		}
	})
}
