package logtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
)

func testNullEntityKey(t *testing.T, l streams.Log, a streams.Appender) {
	mustAppend(t, a, ev("WEB", "dependency.added", "item", "d1", ""))
	evs := readAll(t, l)
	if len(evs) != 1 || evs[0].EntityKey != "" {
		t.Fatalf("events %+v, want one with empty entity key", evs)
	}
	// An item event without a key belongs to no item stream, not even one named "".
	head, _ := l.Head(ctxT(t))
	for _, key := range []string{"WEB-1", "d1"} {
		got, err := l.ReadStream(ctxT(t), streams.Stream{Kind: streams.StreamItem, Key: key}, 0, head, 10)
		if err != nil || len(got) != 0 {
			t.Fatalf("item:%s = %+v, %v; want none", key, got, err)
		}
	}
}

func testPayload(t *testing.T, l streams.Log, a streams.Appender) {
	payloads := []string{
		``, // nil means {}
		`{}`,
		`{"from":"backlog","to":"ready"}`,
		`{ "nested": {"a": [1, 2.5, -3e2, true, false, null], "s": "x\"y\\z"}, "u": "héllo ✓ \u00e9 \ud83d\ude00" }`,
		`[1,2,3]`,
		`"text"`,
		`42`,
		`{"big": 12345678901234567890, "dup": 1, "dup": 2}`,
	}
	var in []streams.NewEvent
	for i, p := range payloads {
		e := ev("WEB", "t", "item", fmt.Sprint("p", i), "WEB-1")
		e.Payload = nil
		if p != "" {
			e.Payload = []byte(p)
		}
		in = append(in, e)
	}
	mustAppend(t, a, in...)
	evs := readAll(t, l)
	if len(evs) != len(payloads) {
		t.Fatalf("read %d events", len(evs))
	}
	for i, e := range evs {
		want := payloads[i]
		if want == "" {
			want = "{}"
			if !bytes.Equal(e.Payload, []byte("{}")) {
				t.Fatalf("empty payload read as %q, want {}", e.Payload)
			}
		}
		if i == 7 { // a big integer keeps its digits; the last duplicate key wins
			var m map[string]json.Number
			d := json.NewDecoder(bytes.NewReader(e.Payload))
			d.UseNumber()
			if err := d.Decode(&m); err != nil || m["big"] != "12345678901234567890" || m["dup"] != "2" {
				t.Fatalf("payload %s decoded %v, %v", e.Payload, m, err)
			}
			continue
		}
		sameJSON(t, e.Payload, []byte(want))
	}
}

func testInvalid(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	good := ev("WEB", "t", "item", "ok", "WEB-1")
	bad := []streams.NewEvent{
		{ProjectKey: "WEB", Payload: []byte(`{"a":`)},
		{ProjectKey: "WEB", Payload: []byte(`{"a":1} {"b":2}`)},
		{ProjectKey: "WEB", Payload: []byte(`{"a":"\u0000"}`)},
		{ProjectKey: "WEB", Payload: []byte(`{"a":"\ud800"}`)},
		{ProjectKey: "WEB\x00"},
		{ProjectKey: "WEB", EntityKey: "\xff"},
	}
	for i, b := range bad {
		if _, err := a.Append(ctx, good, b); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("bad event %d: Append error %v, want ErrInvalid", i, err)
		}
	}
	// Valid payloads that only look suspicious.
	for _, p := range []string{`{"a":"\\u0000"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\\"}`} {
		e := good
		e.Payload = []byte(p)
		if _, err := a.Append(ctx, e); err != nil {
			t.Errorf("payload %s: %v", p, err)
		}
	}
	evs := readAll(t, l)
	if len(evs) != 3 {
		t.Fatalf("log holds %d events, want only the 3 valid ones", len(evs))
	}
}

func testOccurredAt(t *testing.T, l streams.Log, a streams.Appender) {
	before := time.Now().Add(-time.Minute)
	given := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	e1 := ev("WEB", "t", "item", "now1", "WEB-1")
	e2 := ev("WEB", "t", "item", "now2", "WEB-1")
	e3 := ev("WEB", "t", "item", "given", "WEB-1")
	e3.OccurredAt = given
	mustAppend(t, a, e1, e2, e3)
	after := time.Now().Add(time.Minute)
	evs := readAll(t, l)
	if len(evs) != 3 {
		t.Fatalf("read %d events", len(evs))
	}
	// The clocks of this process and the store can differ a little, hence the minute.
	if at := evs[0].OccurredAt; at.Before(before) || at.After(after) {
		t.Fatalf("occurred_at %v not near now", at)
	}
	if !evs[0].OccurredAt.Equal(evs[1].OccurredAt) {
		t.Fatalf("events of one append have different times %v, %v", evs[0].OccurredAt, evs[1].OccurredAt)
	}
	if want := given.Truncate(time.Microsecond); !evs[2].OccurredAt.Equal(want) {
		t.Fatalf("given occurred_at read as %v, want %v", evs[2].OccurredAt, want)
	}
}

func testConcurrent(t *testing.T, l streams.Log, a streams.Appender) {
	ctx := ctxT(t)
	const writers, batches, per = 4, 25, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var evs []streams.NewEvent
				for i := range per {
					evs = append(evs, ev("WEB", "t", "item", fmt.Sprintf("w%d-b%d-%d", w, b, i), "WEB-1"))
				}
				if _, err := a.Append(ctx, evs...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs := readAll(t, l)
	if len(evs) != writers*batches*per {
		t.Fatalf("read %d events, want %d", len(evs), writers*batches*per)
	}
	checkIncreasing(t, evs)
	// Each batch is contiguous: nothing interleaves within one append.
	for i := 0; i < len(evs); i += per {
		var w, b int
		if _, err := fmt.Sscanf(evs[i].EntityID, "w%d-b%d-0", &w, &b); err != nil {
			t.Fatalf("event %d id %q does not start a batch", i, evs[i].EntityID)
		}
		for j := 1; j < per; j++ {
			if want := fmt.Sprintf("w%d-b%d-%d", w, b, j); evs[i+j].EntityID != want {
				t.Fatalf("event %d id %q, want %q", i+j, evs[i+j].EntityID, want)
			}
		}
	}
}
