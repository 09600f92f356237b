package streams

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
)

// Codecs in use at a dispatch (by codecIndex).
var (
	encNone    = [2]bool{}
	encJSON    = [2]bool{true, false}
	encMsgPack = [2]bool{false, true}
	encBoth    = [2]bool{true, true}
)

// bodyEvent is an event of tests: an item's, with payload p.
func bodyEvent(seq int64, p string) Event {
	return Event{Seq: seq, ProjectKey: "WEB", Type: "item.updated", EntityType: "item", EntityID: "0199a",
		EntityKey: "WEB-1", OccurredAt: time.UnixMilli(1_700_000_000_123), ActorKind: ActorHuman,
		ActorSubject: "alice", Payload: []byte(p)}
}

// plainPayloads are payloads a MessagePack body gives back exactly.
var plainPayloads = []string{
	``, `{}`, `null`, `[]`, `"text"`, `7`, `-12`, `true`,
	`{"a": 1, "b": [1, 2, {"c": null}], "d": {"e": true, "f": false}}`, // as Postgres renders it
	`{"title":"Fix <b> & co","n":9223372036854775807,"m":-9223372036854775808,"z":0}`,
	`{"s":"line\nbreak\t\"quoted\" back\\slash \b\f\r \u001f \u0000"}`, "{\"del\":\"\x7f\"}",
	"{\"u\":\"caf\u00e9 \u2713 \u2028 \u2029 \U0001F600\",\"date\":\"2024-01-05\",\"k\":\"-0\"}",
	`{"big":` + strings.Repeat(`[`, 200) + `1` + strings.Repeat(`]`, 200) + `}`,
	`{"dup":1,"dup":2}`,
}

// unplainPayloads are payloads whose JSON text a MessagePack body does not give back.
var unplainPayloads = []string{
	`{"x":1.5}`, `{"x":1.0}`, `{"x":1e3}`, `{"x":-0}`, `{"x":12345678901234567890}`,
	`{"s":"\u00e9"}`, `{"s":"\/"}`, `{"s":"\u000a"}`, `{"s":"\u001F"}`, `{"s":"\u003c"}`, `{"s":"\u007f"}`,
	`{"s":"\ud83d\ude00"}`, "{\"s\":\"\xff\"}",
}

// checkBodies checks that the item made of ev has both bodies byte for byte as encoding ev
// gives them, that it keeps ev only when its bodies do not carry it, and that the window
// counts what its items hold.
func checkBodies(t *testing.T, w *window, it *item, ev *Event) {
	t.Helper()
	for _, c := range []codec.Codec{codec.JSON, codec.MsgPack} {
		want, wantErr := c.Marshal(wireEvent(ev))
		got, err := w.body(it, c)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("event %d %q: %s body\n%q, %v\nwant\n%q, %v", ev.Seq, ev.Payload, c.Name(), got, err, want, wantErr)
		}
	}
	if kept := it.ev.Load() != nil; kept != !it.bodiesCarry(ev) {
		t.Fatalf("event %d %q: event kept %v with bodies %v %v", ev.Seq, ev.Payload, kept,
			it.body[0].Load() != nil, it.body[1].Load() != nil)
	}
	checkCount(t, w)
}

// checkCount checks that the window counts what its items hold.
func checkCount(t *testing.T, w *window) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for i := range w.n {
		n += itemBytes(w.ring[(w.start+i)%len(w.ring)])
	}
	if got := w.heldBytes(); got != n {
		t.Fatalf("the window counts %d bytes, its items hold %d", got, n)
	}
}

// An item lets its event go once its bodies carry it: when both codecs are in use, when
// JSON is (the MessagePack body is transcoded from the JSON one), and when MessagePack alone
// is and the payload's text is plain; a body encoded later is transcoded from the one
// there, and either is byte for byte what encoding the event gives.
func TestWindowItemLetsItsEventGo(t *testing.T) {
	type tc struct {
		ev    Event
		plain bool
	}
	var cases []tc
	for _, p := range plainPayloads {
		cases = append(cases, tc{bodyEvent(0, p), true})
	}
	for _, p := range unplainPayloads {
		cases = append(cases, tc{bodyEvent(0, p), false})
	}
	odd := bodyEvent(0, `{"a":1}`)
	odd.EntityType, odd.EntityKey, odd.Type = "project", "", "project.renamed\u2028<&>"
	odd.EntityID, odd.ActorSubject = "<id>&\"\\\n\x01", "zoë \U0001F600"
	odd.OccurredAt = time.Unix(-5, 0)
	cases = append(cases, tc{odd, true})
	invalid := bodyEvent(0, `{"a":1}`)
	invalid.EntityID = "bad\xffutf8" // not from Postgres: its JSON body is not its MessagePack one
	cases = append(cases, tc{invalid, true})
	cases = append(cases, tc{bodyEvent(0, `{not json`), true}) // no body: nothing to transcode

	for _, enc := range [][2]bool{encNone, encJSON, encMsgPack, encBoth} {
		w := window{maxBytes: DefaultRecentBytes}
		for i := range cases {
			ev := cases[i].ev
			ev.Seq = int64(i + 1)
			w.add([]Event{ev}, enc)
			it := w.ring[(w.start+w.n-1)%len(w.ring)]
			want := !enc[0] && !enc[1] ||
				enc[0] && !enc[1] && !msgpackTranscodes(&ev) ||
				!enc[0] && enc[1] && !cases[i].plain
			if _, err := codec.JSON.Marshal(wireEvent(&ev)); err != nil {
				want = true // no body: the event is all there is
			}
			if kept := it.ev.Load() != nil; kept != want {
				t.Fatalf("codecs %v, event %q: kept %v, want %v", enc, ev.Payload, kept, want)
			}
			if cases[i].plain != jsonTranscodes(&ev) {
				t.Fatalf("payload %q: plain %v", ev.Payload, !cases[i].plain)
			}
			checkCount(t, &w)
			checkBodies(t, &w, it, &ev)
		}
	}
}

// randomJSON appends a random JSON value, written sometimes as Postgres renders it,
// sometimes not.
func randomJSON(rng *rand.Rand, dst []byte, depth int) []byte {
	space := func() {
		if rng.IntN(4) == 0 {
			dst = append(dst, " \n\t"[rng.IntN(3)])
		}
	}
	switch k := rng.IntN(10); {
	case depth == 0 || k < 2 && depth < 4: // payloads are objects
		dst = append(dst, '{')
		for i := range rng.IntN(4) {
			if i > 0 {
				dst = append(dst, ',')
			}
			space()
			dst = randomString(rng, dst)
			dst = append(dst, ':')
			space()
			dst = randomJSON(rng, dst, depth+1)
		}
		return append(dst, '}')
	case k < 3 && depth < 4:
		dst = append(dst, '[')
		for i := range rng.IntN(4) {
			if i > 0 {
				dst = append(dst, ',')
				space()
			}
			dst = randomJSON(rng, dst, depth+1)
		}
		return append(dst, ']')
	case k < 5:
		return randomString(rng, dst)
	case k < 6:
		return append(dst, []string{"true", "false", "null"}[rng.IntN(3)]...)
	}
	nums := []string{"0", "-0", "1", "-1", "127", "128", "-32", "-33", "255", "256", "65535", "65536",
		"4294967295", "4294967296", "-2147483649", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "18446744073709551616", "1.5", "1.0", "1e3", "-2E-2", "0.1"}
	if rng.IntN(2) == 0 {
		return append(dst, nums[rng.IntN(len(nums))]...)
	}
	return fmt.Appendf(dst, "%d", rng.Int64()>>rng.IntN(64))
}

// randomString appends a random JSON string: plain characters, the escapes encoding/json
// and Postgres write, and others.
func randomString(rng *rand.Rand, dst []byte) []byte {
	parts := []string{"a", "Z", " ", "<", ">", "&", "é", "\u2028", "\u2029", "\U0001F600", "\x7f",
		`\"`, `\\`, `\n`, `\t`, `\r`, `\b`, `\f`, `\u0000`, `\u001f`, `\u0001`,
		`\/`, `\u00e9`, `\u000a`, `\u001F`, `\u003c`, `\ud83d\ude00`, `\u2028`}
	dst = append(dst, '"')
	for range rng.IntN(6) {
		p := parts[rng.IntN(len(parts))]
		if strings.HasPrefix(p, `\`) && rng.IntN(3) > 0 {
			p = "x" // escapes are rarer
		}
		dst = append(dst, p...)
	}
	return append(dst, '"')
}

// Random payloads: whatever the codecs in use, either body is byte for byte what encoding
// the event gives, and the event is let go when the bodies carry it.
func TestWindowBodiesOfRandomPayloads(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 3000
	if raceBuild {
		n = 500
	}
	for i := range n {
		p := randomJSON(rng, nil, 0)
		if !json.Valid(p) {
			t.Fatalf("generated invalid JSON %q", p)
		}
		checkPayload(t, p, int64(i+1))
	}
}

func checkPayload(t *testing.T, p []byte, seq int64) {
	t.Helper()
	for _, enc := range [][2]bool{encNone, encJSON, encMsgPack, encBoth} {
		w := window{events: 1, maxBytes: DefaultRecentBytes}
		ev := bodyEvent(seq, string(p))
		w.add([]Event{ev}, enc)
		checkBodies(t, &w, w.ring[w.start], &ev)
	}
}

func FuzzWindowBodies(f *testing.F) {
	for _, p := range append(append([]string{}, plainPayloads...), unplainPayloads...) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !json.Valid([]byte(p)) {
			return
		}
		checkPayload(t, []byte(p), 1)
	})
}

// Many readers asking for the bodies of the same items at once: each body is encoded once
// and kept, the event let go, and the count stays what the items hold.
func TestWindowBodiesConcurrently(t *testing.T) {
	w := window{maxBytes: DefaultRecentBytes}
	var evs []Event
	for i := range 200 {
		evs = append(evs, bodyEvent(int64(i+1), fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", i))))
	}
	w.add(evs, encNone)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range evs {
				it := w.ring[i]
				c := codec.JSON
				if (i+g)%2 == 1 {
					c = codec.MsgPack
				}
				if _, err := w.body(it, c); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range evs {
		checkBodies(t, &w, w.ring[i], &evs[i])
		if w.ring[i].ev.Load() != nil {
			t.Fatalf("event %d kept with both bodies", evs[i].Seq)
		}
	}
}

// payload2K is a plain payload of about 2 KB, as an item's description makes it.
func payload2K(i int) []byte {
	return fmt.Appendf(nil, `{"title":"Item %d","version":%d,"description":"%s"}`, i, i, strings.Repeat("lorem ipsum ", 168))
}

// The window counts what it holds: for events of 2 KB, about the payload less than when it
// held the payload beside the bodies; and the heap it takes is about what it counts.
func TestWindowCountsItsBodiesNotThePayloads(t *testing.T) {
	const n = 2000
	for _, enc := range [][2]bool{encJSON, encMsgPack, encBoth} {
		heap := func() int64 {
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return int64(ms.HeapAlloc)
		}
		w := &window{events: n, maxBytes: DefaultRecentBytes}
		before := heap()
		evs := make([]Event, n)
		old, payloads := 0, 0 // what the window counted when it kept the payloads
		for i := range evs {
			evs[i] = bodyEvent(int64(i+1), string(payload2K(i)))
			evs[i].EntityID = fmt.Sprint("01990000-", i) // from the database: a string each
			evs[i].ActorSubject = fmt.Sprint("user-", i%100)
			old += eventBytes(&evs[i]) + 96
			payloads += len(evs[i].Payload)
		}
		for i := 0; i < n; i += 100 {
			w.add(evs[i:i+100], enc)
		}
		for i := range w.n {
			for c := range w.ring[i].body {
				if p := w.ring[i].body[c].Load(); p != nil {
					old += len(*p)
				}
			}
		}
		evs = nil // as the tailer lets its batch go
		held := int64(w.heldBytes())
		grown := heap() - before
		runtime.KeepAlive(w)
		if w.n != n {
			t.Fatalf("codecs %v: %d events held, want %d", enc, w.n, n)
		}
		drop := (old - int(held)) / n
		t.Logf("codecs %v: %d B an event counted, %d B before; heap %d B an event", enc, held/n, old/n, grown/n)
		if p := payloads / n; drop < p || drop > p+300 {
			t.Fatalf("codecs %v: the count fell by %d B an event, want about the payload's %d B", enc, drop, p)
		}
		if grown < held*8/10 || grown > held*12/10 {
			t.Fatalf("codecs %v: the heap grew by %d B, the window counts %d B", enc, grown, held)
		}
	}
}
