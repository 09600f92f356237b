package codec

import (
	"errors"
	"reflect"
	"testing"
)

func TestPrependField(t *testing.T) {
	meta := map[string]string{"traceparent": "00-0102030405060708090a0b0c0d0e0f10-1112131415161718-01"}
	type params struct {
		Session string `json:"session"`
		Text    string `json:"text,omitempty"`
	}
	for _, c := range []Codec{JSON, MsgPack} {
		t.Run(c.Name(), func(t *testing.T) {
			for _, p := range []any{params{Session: "s", Text: "hi"}, struct{}{}} {
				body, err := c.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				got, err := PrependField(c, body, "_meta", meta)
				if err != nil {
					t.Fatal(err)
				}
				var back map[string]any
				if err := c.Unmarshal(got, &back); err != nil {
					t.Fatalf("%x: %v", got, err)
				}
				var want map[string]any
				_ = c.Unmarshal(body, &want)
				want["_meta"] = map[string]any{"traceparent": meta["traceparent"]}
				if !reflect.DeepEqual(back, want) {
					t.Errorf("%+v: got %v, want %v", p, back, want)
				}
			}
			arr, _ := c.Marshal([]int{1})
			if _, err := PrependField(c, arr, "_meta", meta); !errors.Is(err, ErrNotObject) {
				t.Errorf("an array: %v, want ErrNotObject", err)
			}
		})
	}
}
