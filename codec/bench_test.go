package codec

import "testing"

type benchEvent struct {
	Seq        int64          `json:"seq"`
	Type       string         `json:"type"`
	EntityType string         `json:"entity_type"`
	EntityID   string         `json:"entity_id"`
	EntityKey  *string        `json:"entity_key"`
	OccurredAt int64          `json:"occurred_at"`
	Actor      map[string]any `json:"actor"`
	Payload    RawJSON        `json:"payload"`
}

func sampleEvent() *benchEvent {
	k := "WEB-42"
	return &benchEvent{Seq: 1042, Type: "item.state_changed", EntityType: "item",
		EntityID: "0199a1b2-7c3d-7e4f-8a5b-6c7d8e9fa0b1", EntityKey: &k, OccurredAt: 1790830000000,
		Actor:   map[string]any{"kind": "human", "subject": "8751"},
		Payload: RawJSON(`{"from":"backlog","to":"ready","version":3}`)}
}

// BenchmarkEncodeEvent: encoding one event's body, done once per codec per event.
func BenchmarkEncodeEvent(b *testing.B) {
	for _, c := range []Codec{MsgPack, JSON} {
		b.Run(c.Name(), func(b *testing.B) {
			ev := sampleEvent()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := c.Marshal(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSplice: building one subscriber's frame from the shared body, done
// per delivery into a reused buffer.
func BenchmarkSplice(b *testing.B) {
	for _, c := range []Codec{MsgPack, JSON} {
		b.Run(c.Name(), func(b *testing.B) {
			body, _ := c.Marshal(sampleEvent())
			var buf []byte
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				var err error
				if buf, err = c.Splice(buf[:0], "stream.event", "subscription-1", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeRequest: decoding a client's request envelope.
func BenchmarkDecodeRequest(b *testing.B) {
	for _, c := range []Codec{MsgPack, JSON} {
		b.Run(c.Name(), func(b *testing.B) {
			params, _ := c.Marshal(map[string]any{"subscription": "s1", "stream": "project:WEB", "from_seq": 1000})
			frame, _ := c.Encode(nil, &Message{ID: 7, HasID: true, Method: "stream.subscribe", Params: params})
			b.ReportAllocs()
			var m Message
			for i := 0; i < b.N; i++ {
				if err := c.Decode(frame, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
