package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// TestAdmitAndScreen: Admit runs before decoding and may refuse or skip a
// frame; Screen sees the decoded message (or the decode error) and may
// drop it unanswered.
func TestAdmitAndScreen(t *testing.T) {
	for _, c := range []codec.Codec{codec.JSON, codec.MsgPack} {
		t.Run(c.Name(), func(t *testing.T) {
			refuse := &Error{Code: -32029, Message: "limit exceeded"}
			served := make(chan string, 16)
			frames := 0
			_, cl := pair(t, c, &Options{
				Handler: HandlerFunc(func(_ context.Context, r *Request) (any, error) {
					served <- r.Method
					return "ok", nil
				}),
				Hooks: &hookFuncs{
					admit: func(context.Context) error {
						frames++
						switch frames {
						case 2:
							return refuse
						case 3:
							return ErrSkip
						}
						return nil
					},
					screen: func(m *codec.Message, err *codec.DecodeError) bool {
						return err != nil || m.Method != "dropped"
					},
				},
			}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			if err := cl.Call(ctx, "first", nil, nil); err != nil { // frame 1: served
				t.Fatal(err)
			}
			if err := cl.Call(ctx, "second", nil, nil); Code(err) != -32029 { // frame 2: refused
				t.Fatalf("refused call: %v", err)
			}
			short, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if err := cl.Call(short, "third", nil, nil); !errors.Is(err, context.DeadlineExceeded) { // frame 3: skipped
				t.Fatalf("skipped call: %v", err)
			}
			scancel()
			short, scancel = context.WithTimeout(ctx, 100*time.Millisecond)
			if err := cl.Call(short, "dropped", nil, nil); !errors.Is(err, context.DeadlineExceeded) { // frame 4: screened out
				t.Fatalf("screened call: %v", err)
			}
			scancel()
			if err := cl.Call(ctx, "fifth", nil, nil); err != nil {
				t.Fatal(err)
			}
			close(served)
			var got []string
			for m := range served {
				got = append(got, m)
			}
			if len(got) != 2 || got[0] != "first" || got[1] != "fifth" {
				t.Fatalf("served %v", got)
			}
		})
	}
}
