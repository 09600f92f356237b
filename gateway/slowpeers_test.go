package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
)

// slowReader opens a connection of subject that subscribes to streams and then reads
// nothing, with a small receive buffer: what is sent to it stays queued on the replica.
func slowReader(t *testing.T, env *gatewaytest.Env, subject string, streams ...string) {
	t.Helper()
	h := hostileDial(t, env)
	_ = h.c.(*net.TCPConn).SetReadBuffer(16 << 10)
	if resp := h.upgrade(t, ""); resp.StatusCode != 101 {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	slow := &rawClient{t: t, c: h.c, br: h.br}
	slow.write(textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, subject))))
	slow.want(1)
	var subs [][]byte
	for i, stream := range streams {
		subs = append(subs, textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"stream.subscribe","params":{"subscription":"s%d","stream":%q}}`, 10+i, i, stream)))
	}
	slow.write(subs...)
	for _, p := range slow.responses(len(streams)) {
		if strings.Contains(string(p), `"error"`) {
			t.Fatalf("subscribe: %s", p)
		}
	}
}

// orderedReader reads the stream.event notifications of fast (MessagePack) on a goroutine
// until it has n, checking that their seqs rise.
type orderedReader struct {
	got    atomic.Int64
	failed atomic.Value // string: why it stopped early
	done   chan struct{}
}

func readInOrder(fast *wsClient, n int64) *orderedReader {
	r := &orderedReader{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		var last int64
		for r.got.Load() < n {
			m, err := fast.next(60 * time.Second)
			if err != nil {
				r.failed.Store(err.Error())
				return
			}
			if m.Method != "stream.event" {
				continue
			}
			var ev struct {
				Seq int64 `json:"seq"`
			}
			if err := codec.MsgPack.Unmarshal(m.Params, &ev); err != nil || ev.Seq <= last {
				r.failed.Store(fmt.Sprintf("event seq %d after %d (%v)", ev.Seq, last, err))
				return
			}
			last = ev.Seq
			r.got.Add(1)
		}
	}()
	return r
}

// wait returns once the reader has ended, failing t if it did not get every event.
func (r *orderedReader) wait(t *testing.T) {
	t.Helper()
	<-r.done
	if msg := r.failed.Load(); msg != nil {
		t.Fatalf("the fast reader: %v (after %d events)", msg, r.got.Load())
	}
}

// appendPaced commits n item.updated events of WEB with a description of payload bytes, in
// batches of 10, keeping within 20 events of r, as a writer on a machine with cores to
// spare would find a reader that keeps up; entity names which item each event is of.
func appendPaced(t *testing.T, env *gatewaytest.Env, r *orderedReader, n, payload int, entity func(i int) string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"description": strings.Repeat("d", payload)})
	for i := 0; i < n; i += 10 {
		for r.got.Load() < int64(i-20) && r.failed.Load() == nil {
			time.Sleep(time.Millisecond)
		}
		var batch []streams.NewEvent
		for j := i; j < i+10; j++ {
			batch = append(batch, streams.NewEvent{ProjectKey: "WEB", Type: "item.updated", EntityType: "item",
				EntityID: fmt.Sprint(j), EntityKey: entity(j), ActorKind: "human", ActorSubject: "bob", Payload: body})
		}
		if _, err := env.Store.Append(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
	}
}
