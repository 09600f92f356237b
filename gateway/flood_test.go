package gateway_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// Bounds of TestSubscribeFloodHeap: what 50,000 pipelined subscribe
// requests may add to the process's heap, live after the flood and at its
// peak (garbage included). The subscription limit keeps the live growth to
// 256 subscriptions; the connection's bounded request slots and out queue
// keep the peak small.
const (
	floodRequests    = 50_000
	floodLiveGrowth  = 4 << 20
	floodPeakGrowth  = 32 << 20
	floodSampleEvery = 5 * time.Millisecond
)

// TestSubscribeFloodHeap sends 50,000 pipelined stream.subscribe requests
// with distinct ids and streams on one connection, in each codec, and measures the
// heap in this process (server and client) with runtime.ReadMemStats. It
// does not run in parallel with other tests, so the heap is its own.
func TestSubscribeFloodHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of 50,000 requests")
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{RequestRate: 10_000_000, SubjectRequestRate: 10_000_000}})
	env.Project(t, "WEB", "alice", "viewer")
	for _, c := range codecs {
		t.Run(c.Name(), func(t *testing.T) {
			k := login(t, env, c, "alice")
			base := heapAfterGC()
			peak := heapPeak(floodSampleEvery)
			typ := websocket.MessageText
			if c.Binary() {
				typ = websocket.MessageBinary
			}
			werr := make(chan error, 1)
			go func() {
				for i := range floodRequests {
					// Distinct streams (a second subscription to one stream is refused as such).
					params, _ := c.Marshal(map[string]string{"subscription": fmt.Sprint("flood-", i), "stream": fmt.Sprint("item:WEB-", i+1)})
					f, _ := c.Encode(nil, &codec.Message{ID: int64(i + 100), HasID: true, Method: "stream.subscribe", Params: params})
					if err := k.ws.Write(context.Background(), typ, f); err != nil {
						werr <- err
						return
					}
				}
				werr <- nil
			}()
			ok, refused := 0, 0
			for range floodRequests {
				m := k.mustNext()
				switch {
				case !m.IsResponse():
					t.Fatalf("unexpected %+v", m)
				case m.Error == nil:
					ok++
				case m.Error.Code == -32029:
					refused++
				default:
					t.Fatalf("error %+v", m.Error)
				}
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
			live := int64(heapAfterGC()) - int64(base)
			peakGrowth := int64(peak()) - int64(base)
			t.Logf("%d subscribed, %d refused; heap growth %.1f MiB live, %.1f MiB at the peak",
				ok, refused, float64(live)/(1<<20), float64(peakGrowth)/(1<<20))
			if ok != 256 || refused != floodRequests-256 {
				t.Fatalf("%d subscribed, %d refused", ok, refused)
			}
			if live > floodLiveGrowth {
				t.Fatalf("live heap grew by %d bytes, bound %d", live, floodLiveGrowth)
			}
			if peakGrowth > floodPeakGrowth {
				t.Fatalf("heap peaked %d bytes above the baseline, bound %d", peakGrowth, floodPeakGrowth)
			}
		})
	}
}

// settledHeap is the live heap once it has stopped falling for longer than a closed
// connection's socket is kept (its close timer, of at most 3 s, holds what the session
// reached): what replicas of earlier tests still held is then not in a baseline.
func settledHeap(t *testing.T) uint64 {
	t.Helper()
	const quiet = 4 * time.Second
	deadline := time.Now().Add(30 * time.Second)
	low, since := heapAfterGC(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("the heap did not settle within 30 s (%d bytes)", low)
		}
		time.Sleep(250 * time.Millisecond)
		if h := heapAfterGC(); h+1<<20 < low {
			low, since = h, time.Now()
		}
	}
	return heapAfterGC()
}

// heapAfterGC is the live heap: after two collections, since what a sync.Pool holds
// survives the first in its victim cache.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHostileFramesAfterAuth sends frames built to cost the decoder:
// MessagePack lengths of 2^32-1 in a few bytes, nesting as deep as a frame
// allows, JSON nested 100,000 deep. Each is answered with an error, and
// the connection goes on.
func TestHostileFramesAfterAuth(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	const limit = 1 << 20
	deepMsgpack := func(open byte) []byte {
		// {"jsonrpc":"2.0","id":1,"method":"system.ping","params": [[[[...]]]]}
		head := mp(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "system.ping"})
		head[0]++ // one more key: params
		head = append(head, 0xa6)
		head = append(head, "params"...)
		n := limit - len(head) - 64
		b := append(head, []byte(strings.Repeat(string([]byte{open}), n))...)
		return append(b, 0x90) // the innermost, empty
	}
	msgpackFrames := map[string][]byte{
		"str32 of 2^32-1":   {0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},
		"bin32 of 2^32-1":   {0x81, 0xa6, 'p', 'a', 'r', 'a', 'm', 's', 0xc6, 0xff, 0xff, 0xff, 0xff},
		"array32 of 2^32-1": {0x81, 0xa6, 'p', 'a', 'r', 'a', 'm', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0},
		"map32 of 2^32-1":   {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'x', 0xc0},
		"ext32 of 2^32-1":   {0x81, 0xa6, 'p', 'a', 'r', 'a', 'm', 's', 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},
		"nested arrays":     deepMsgpack(0x91),
		"nested maps":       deepMsgpack(0x81), // keys are themselves maps
	}
	jsonFrames := map[string]string{
		"nested 100000 deep arrays":  `{"jsonrpc":"2.0","id":1,"method":"system.ping","params":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`,
		"nested 100000 deep objects": `{"jsonrpc":"2.0","id":1,"method":"system.ping","params":` + strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000) + `}`,
		"unclosed 500000 deep":       `{"jsonrpc":"2.0","id":1,"method":"system.ping","params":` + strings.Repeat("[", 500000),
		"huge number":                `{"jsonrpc":"2.0","id":1` + strings.Repeat("0", 1000) + `,"method":"system.ping"}`,
	}
	run := func(t *testing.T, c codec.Codec, frame []byte) {
		if len(frame) > limit {
			t.Fatalf("frame of %d bytes is over the read limit", len(frame))
		}
		k := login(t, env, c, "alice")
		k.writeRaw(frame)
		m := k.mustNext()
		if m.Error == nil {
			t.Fatalf("got %+v, want an error", m)
		}
		if m.Error.Code != -32700 && m.Error.Code != -32600 && m.Error.Code != -32602 {
			t.Fatalf("error %d %q", m.Error.Code, m.Error.Message)
		}
		k.mustCall("system.ping", nil, nil)
	}
	for name, f := range msgpackFrames {
		t.Run("msgpack/"+strings.ReplaceAll(name, " ", "_"), func(t *testing.T) { t.Parallel(); run(t, codec.MsgPack, f) })
	}
	for name, f := range jsonFrames {
		t.Run("json/"+strings.ReplaceAll(name, " ", "_"), func(t *testing.T) { t.Parallel(); run(t, codec.JSON, []byte(f)) })
	}
}
