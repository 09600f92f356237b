package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/operator"
)

// admin connections prints a table of the replicas, whether each answered, and the
// connections, with a count that says when the listing was cut; --json prints the REST
// API's document.
func TestWriteListing(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	l := &operator.Listing{
		Replicas: []operator.ReplicaAnswer{{Replica: "aaa", Answered: true}, {Replica: "bbb"}},
		Connections: []operator.Connection{
			{Replica: "aaa", ID: "00000000000000ff", Subject: "alice smith", Codec: "msgpack", Transport: "websocket", ConnectedAt: at,
				RemoteAddr: "10.0.0.1:5000", Subscriptions: 2, Watches: 1, ExpiresAt: at.Add(time.Hour)},
			{Replica: "aaa", ID: "0000000000000100", Subject: "robot", ClientID: "ci", Codec: "json", Transport: "http", ConnectedAt: at,
				RemoteAddr: "10.0.0.2:5000", ExpiresAt: at.Add(time.Hour)},
		},
		Truncated: true,
	}
	var b bytes.Buffer
	if err := writeListing(&b, l, false); err != nil {
		t.Fatal(err)
	}
	want := `REPLICA  ANSWERED
aaa      yes
bbb      no: not within 2s

REPLICA  CONNECTION        SUBJECT        CLIENT  CODEC    TRANSPORT  CONNECTED             REMOTE         SUBSCRIPTIONS  WATCHES  EXPIRES
aaa      00000000000000ff  "alice smith"  -       msgpack  websocket  2026-03-04T05:06:07Z  10.0.0.1:5000  2              1        2026-03-04T06:06:07Z
aaa      0000000000000100  "robot"        ci      json     http       2026-03-04T05:06:07Z  10.0.0.2:5000  0              0        2026-03-04T06:06:07Z

2 connections (truncated: there are more than these; GET /api/v1/admin/connections?limit= shows up to 10000)
`
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	if err := writeListing(&b, l, true); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("--json: %v %s", err, b.String())
	}
	conns, _ := doc["connections"].([]any)
	first, _ := conns[0].(map[string]any)
	if len(conns) != 2 || doc["truncated"] != true || first["connected_at"] != "2026-03-04T05:06:07.000Z" || first["client_id"] != nil ||
		first["remote_addr"] != "10.0.0.1:5000" || first["watches"] != 1.0 {
		t.Fatalf("--json: %s", b.String())
	}
}
