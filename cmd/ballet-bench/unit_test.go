package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/streams"
)

func itoa(n int) string { return strconv.Itoa(n) }

func tokenHandler(tok string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "subject": "bench"})
	}
}

var codecs = []codec.Codec{codec.MsgPack, codec.JSON}

// eventFrame encodes a stream.event exactly as the gateway does: the
// event's wire form encoded once, then spliced per subscriber.
func eventFrame(t testing.TB, c codec.Codec, sub string, seq int64, payload string) []byte {
	t.Helper()
	key := "BENCH-1"
	body, err := c.Marshal(&streams.WireEvent{
		Seq: seq, Type: "bench.event", EntityType: "item", EntityID: "e1", EntityKey: &key,
		OccurredAt: 1790830000000, Actor: streams.WireActor{Kind: "service", Subject: "x"},
		Payload: codec.RawJSON(payload),
	})
	if err != nil {
		t.Fatal(err)
	}
	frame, err := c.Splice(nil, "stream.event", sub, body)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

func TestClassifyEventFastPath(t *testing.T) {
	seqs := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<62 + 5}
	for _, c := range codecs {
		for _, seq := range seqs {
			for _, sub := range []string{"s", "r12", strings.Repeat("x", 64), "ü"} {
				frame := eventFrame(t, c, sub, seq, `{"t":1,"pad":"xx"}`)
				var fi frameInfo
				if seq >= 1e18 { // past what the JSON fast path reads
					if err := classify(c, frame, &fi); err != nil || fi.seq != seq || string(fi.sub) != sub {
						t.Fatalf("%s: seq %d: %+v %v", c.Name(), seq, fi, err)
					}
					continue
				}
				if !fastPath(c, frame, &fi) {
					t.Fatalf("%s: fast path refused seq %d sub %q: %q", c.Name(), seq, sub, frame)
				}
				if fi.seq != seq || string(fi.sub) != sub {
					t.Fatalf("%s: fast path read seq %d sub %q, want %d %q", c.Name(), fi.seq, fi.sub, seq, sub)
				}
				var slow frameInfo
				if err := slowClassify(c, frame, &slow); err != nil || slow.kind != frameEvent || slow.seq != seq || string(slow.sub) != sub {
					t.Fatalf("%s: slow path %+v, %v", c.Name(), slow, err)
				}
			}
		}
	}
}

func fastPath(c codec.Codec, frame []byte, fi *frameInfo) bool {
	if c.Binary() {
		return fastMsgpackEvent(frame, fi)
	}
	return fastJSONEvent(frame, fi)
}

func TestClassifyOtherFrames(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.Name(), func(t *testing.T) {
			enc := func(m *codec.Message) []byte {
				b, err := c.Encode(nil, m)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			raw := func(v any) []byte {
				b, err := c.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			var fi frameInfo
			// seq not first: only the full decoder reads it.
			reordered := enc(&codec.Message{Method: "stream.event", Params: raw(map[string]any{
				"type": "x", "subscription": "s", "seq": 42,
			})})
			if err := classify(c, reordered, &fi); err != nil || fi.kind != frameEvent || fi.seq != 42 || string(fi.sub) != "s" {
				t.Fatalf("reordered event: %+v %v", fi, err)
			}
			closed := enc(&codec.Message{Method: "stream.closed", Params: raw(map[string]any{"subscription": "s", "reason": "lagging"})})
			if err := classify(c, closed, &fi); err != nil || fi.kind != frameClosed || fi.reason != "lagging" || string(fi.sub) != "s" {
				t.Fatalf("closed: %+v %v", fi, err)
			}
			hb := enc(&codec.Message{Method: "$/heartbeat", Params: raw(map[string]any{"time": 1})})
			if err := classify(c, hb, &fi); err != nil || fi.kind != frameHeartbeat {
				t.Fatalf("heartbeat: %+v %v", fi, err)
			}
			res := enc(&codec.Message{ID: 7, HasID: true, Result: raw(map[string]any{"seq": 3})})
			if err := classify(c, res, &fi); err != nil || fi.kind != frameResponse || fi.id != 7 || fi.err != nil {
				t.Fatalf("result: %+v %v", fi, err)
			}
			e := enc(&codec.Message{ID: 8, HasID: true, Error: &codec.Error{Code: -32010, Message: "resync required"}})
			if err := classify(c, e, &fi); err != nil || fi.kind != frameResponse || fi.err == nil || fi.err.Code != -32010 {
				t.Fatalf("error: %+v %v", fi, err)
			}
			if err := classify(c, []byte("\x00garbage"), &fi); err == nil {
				t.Fatal("garbage classified")
			}
		})
	}
}

func FuzzClassify(f *testing.F) {
	for _, c := range codecs {
		f.Add(eventFrame(f, c, "s", 1234, `{"a":[1,2,{"b":null}]}`))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"stream.event","params":{"subscription":"s","seq":00}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"stream.event","params":{"subscription":"s","seq":99999999999999999999}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range codecs {
			var fast, slow frameInfo
			if !fastPath(c, data, &fast) {
				_ = classify(c, data, &slow)
				continue
			}
			// What the fast path accepts is an event; when the full decoder
			// also accepts the frame it must read the same seq.
			if err := slowClassify(c, data, &slow); err == nil && slow.kind == frameEvent && isPlain(data) {
				if slow.seq != fast.seq || !bytes.Equal(slow.sub, fast.sub) {
					t.Fatalf("%s: fast %d %q, full %d %q", c.Name(), fast.seq, fast.sub, slow.seq, slow.sub)
				}
			}
		}
	})
}

// isPlain excludes frames with a repeated "seq" or "subscription" key,
// where decoders may legitimately pick either value.
func isPlain(data []byte) bool {
	return bytes.Count(data, []byte("seq")) == 1 && bytes.Count(data, []byte("subscription")) == 1
}

func FuzzEventFrame(f *testing.F) {
	f.Add("s", int64(1), "pad")
	f.Add("sub-\"quoted\"", int64(1<<40), "")
	f.Fuzz(func(t *testing.T, sub string, seq int64, pad string) {
		if seq < 0 || !streams.ValidText(sub) || !streams.ValidText(pad) {
			t.Skip()
		}
		payload, _ := json.Marshal(map[string]string{"pad": pad})
		for _, c := range codecs {
			frame := eventFrame(t, c, sub, seq, string(payload))
			var fi frameInfo
			if err := classify(c, frame, &fi); err != nil {
				t.Fatalf("%s: %v", c.Name(), err)
			}
			if fi.kind != frameEvent || fi.seq != seq || string(fi.sub) != sub {
				t.Fatalf("%s: %+v, want seq %d sub %q", c.Name(), fi, seq, sub)
			}
		}
	})
}

func TestHistogram(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 {
		t.Fatal("empty histogram")
	}
	for i := int64(1); i <= 10000; i++ {
		h.record(i * 1000) // 1 µs … 10 ms
	}
	h.record(-5)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := q * 10 // ms
		if got := h.quantile(q); math.Abs(got-want)/want > 0.02 {
			t.Errorf("q%v = %v ms, want about %v", q, got, want)
		}
	}
	if h.maxMs() != 10 || h.count.Load() != 10001 {
		t.Errorf("max %v count %d", h.maxMs(), h.count.Load())
	}
	for us := uint64(0); us < 1<<20; us += 7 {
		i := histIndex(us)
		if v := histValue(i); math.Abs(v-float64(us)) > float64(us)/64+1 {
			t.Fatalf("bucket %d of %d µs has value %v", i, us, v)
		}
	}
}

func TestTracker(t *testing.T) {
	commits := newCommitLog(100)
	for _, s := range []int64{101, 102, 103, 105, 300} {
		commits.set(s, 1)
	}
	commits.set(100, 1) // not ours: ignored
	if commits.count.Load() != 5 || commits.maxSeq.Load() != 300 || commits.get(104) != 0 {
		t.Fatalf("commit log count %d max %d", commits.count.Load(), commits.maxSeq.Load())
	}
	var lat histogram
	var dropped atomic.Int64
	tr := newTracker(100)
	done := tr.watch(300)
	for _, s := range []int64{99, 101, 103, 103, 102, 104, 300} {
		tr.event(s, 10, commits, &lat, &dropped)
	}
	select {
	case <-done:
	default:
		t.Fatal("target not reached")
	}
	bm := commits.bitmap()
	if g := tr.gaps(bm); g != 1 { // 105
		t.Errorf("gaps %d, want 1", g)
	}
	if d := tr.delivered(bm); d != 4 {
		t.Errorf("delivered %d, want 4", d)
	}
	if tr.dups != 1 || tr.outOfOrder != 1 || tr.received != 6 || tr.last.Load() != 300 {
		t.Errorf("dups %d ooo %d received %d last %d", tr.dups, tr.outOfOrder, tr.received, tr.last.Load())
	}
	if lat.count.Load() != 4 {
		t.Errorf("latency samples %d, want 4", lat.count.Load())
	}
	// An event read before its commit time is known waits until resolve.
	tr2 := newTracker(100)
	tr2.event(106, 50, commits, &lat, &dropped)
	commits.set(106, 60)
	if early := tr2.resolve(commits, &lat); early != 1 || lat.count.Load() != 5 {
		t.Errorf("early %d samples %d", early, lat.count.Load())
	}
}

func TestReportJSON(t *testing.T) {
	r := &report{}
	r.add("gaps", int64(0), "")
	r.add("latency_p99_ms", 1.234567, "ms")
	r.add("mode", "live", "")
	var b bytes.Buffer
	if err := r.writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != `{"gaps":0,"latency_p99_ms":1.2346,"mode":"live","ok":true,"failures":[]}`+"\n" {
		t.Errorf("json %s", got)
	}
	r.fail("%d gaps", 2)
	b.Reset()
	if err := r.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "result: FAIL") || !strings.Contains(b.String(), "- 2 gaps") {
		t.Errorf("table %s", b.String())
	}
}

func TestParseRSS(t *testing.T) {
	n, err := parseVmRSS([]byte("Name:\tx\nVmPeak:\t  900 kB\nVmRSS:\t    1234 kB\n"))
	if err != nil || n != 1234*1024 {
		t.Errorf("VmRSS %d %v", n, err)
	}
	if _, err := parseVmRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("missing VmRSS accepted")
	}
	text := "# HELP process_resident_memory_bytes x\n# TYPE process_resident_memory_bytes gauge\n" +
		"process_resident_memory_bytes_other 5\nprocess_resident_memory_bytes 1.2345e+07\n"
	if n, err := parseMetricsRSS(strings.NewReader(text)); err != nil || n != 12345000 {
		t.Errorf("metrics %d %v", n, err)
	}
	if _, err := parseMetricsRSS(strings.NewReader("up 1\n")); err == nil {
		t.Error("missing metric accepted")
	}
	// The gateway's own metrics carry it.
	mfs, err := gateway.NewMetrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "process_resident_memory_bytes"
	}
	if !found {
		t.Error("gateway metrics lack process_resident_memory_bytes")
	}
}

func TestWindowGate(t *testing.T) {
	commits := newCommitLog(0)
	trs := []*tracker{newTracker(0), newTracker(0), newTracker(0)}
	gate := windowGate(trs, commits, 10)
	ctx := context.Background()
	if err := gate(ctx); err != nil {
		t.Fatal(err)
	}
	commits.set(20, 1)
	trs[0].last.Store(20)
	trs[1].last.Store(15)
	trs[2].last.Store(5) // 15 behind
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := gate(short); err == nil {
		t.Fatal("gate open with a subscriber 15 behind a window of 10")
	}
	trs[2].ended.Store(true) // closed subscriptions do not hold the writer
	if err := gate(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestParseStat(t *testing.T) {
	line := "4242 (postgres: walsender (x) ) S 17 4242 4242 0 -1 4194560 300 0 0 0 7 3 11 5 20 0 1 0 100 0 0"
	ticks, ppid, err := parseStat(line)
	if err != nil || ppid != 17 || ticks != 7+3+11+5 {
		t.Fatalf("parseStat = %d ticks, ppid %d, %v; want 26, 17", ticks, ppid, err)
	}
	if _, _, err := parseStat("4242 (x S 1"); err == nil {
		t.Fatal("parseStat accepted a malformed line")
	}
	if _, err := parse([]string{"--mode", "replay", "--db-pid", "1", "--db", "postgres://x", "--token", "t"}, func(string) string { return "" }); err == nil {
		t.Fatal("--db-pid accepted outside the live mode")
	}
}
