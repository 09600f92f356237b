package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
)

// TestSubscribeWithTypes: a subscription with "types" receives only the matching events,
// live and replayed, with increasing seqs; one event stream serves subscriptions with and
// without filters; a bad filter is -32602.
func TestSubscribeWithTypes(t *testing.T) {
	storeKinds(t, func(t *testing.T, env *gatewaytest.Env) {
		mixed := func(project string, n int) []streams.NewEvent {
			var evs []streams.NewEvent
			for i := range n {
				switch i % 3 {
				case 0:
					evs = append(evs, itemEvent(project, fmt.Sprint(project, "-", i), "item.created", i))
				case 1:
					evs = append(evs, itemEvent(project, fmt.Sprint(project, "-", i), "item.state_changed", i))
				default:
					ev := itemEvent(project, fmt.Sprint(project, "-", i), "dependency.added", i)
					ev.EntityType = "dependency"
					evs = append(evs, ev)
				}
			}
			return evs
		}
		forEachCodec(t, func(t *testing.T, c codec.Codec) {
			project := map[bool]string{true: "BIN", false: "TXT"}[c.Binary()]
			env.Project(t, project, "alice", "viewer")
			from := appendN(t, env, itemEvent(project, project+"-0", "item.created", 0))
			appendN(t, env, mixed(project, 30)...) // replayed
			stream := "project:" + project
			k := login(t, env, c, "alice")
			k.mustCall("stream.subscribe", map[string]any{"subscription": "created", "stream": stream, "types": []string{"item.created"}, "from_seq": from}, nil)
			k.mustCall("stream.subscribe", map[string]any{"subscription": "items", "stream": stream, "types": []string{"item.*", "nothing.matches"}, "from_seq": from}, nil)
			k.mustCall("stream.subscribe", map[string]any{"subscription": "all", "stream": stream, "from_seq": from}, nil)
			appendN(t, env, mixed(project, 30)...) // live
			want := map[string]int{"created": 20, "items": 40, "all": 60}
			got := map[string][]*wireEvent{}
			for n := 0; n < 120; n++ {
				ev := k.mustEvent()
				got[ev.Subscription] = append(got[ev.Subscription], ev)
			}
			for sub, evs := range got {
				if len(evs) != want[sub] {
					t.Fatalf("%s: %d events, want %d", sub, len(evs), want[sub])
				}
				for i, ev := range evs {
					if i > 0 && ev.Seq <= evs[i-1].Seq {
						t.Fatalf("%s: seq %d after %d", sub, ev.Seq, evs[i-1].Seq)
					}
					switch {
					case sub == "created" && ev.Type != "item.created",
						sub == "items" && !strings.HasPrefix(ev.Type, "item."):
						t.Fatalf("%s: event of type %s delivered", sub, ev.Type)
					}
				}
			}
			if ev, err := k.nextEvent(200 * time.Millisecond); err == nil {
				t.Fatalf("one event too many: %+v", ev)
			}
			for _, types := range []any{[]string{}, []string{"a*b"}, []string{""}, "item.*", []int{1}} {
				k.wantError("stream.subscribe", map[string]any{"subscription": "bad", "stream": stream, "types": types}, -32602)
			}
		})
	})
}
