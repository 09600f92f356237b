package logtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/ballet/gateway/streams"
)

func testProjects(t *testing.T, l streams.Log, _ streams.Appender) {
	ps, ok := l.(streams.ProjectStore)
	if !ok {
		return // a log without projects has nothing to conform to here
	}
	ctx := ctxT(t)
	if err := ps.CreateProject(ctx, "WEB", "Web site", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := ps.CreateProject(ctx, "WEB", "again", "bob"); !errors.Is(err, streams.ErrExists) {
		t.Fatalf("duplicate CreateProject = %v, want ErrExists", err)
	}
	for _, key := range []string{"", "web", "1WEB", "W-B", "ABCDEFGHIJKLMNOPQRSTU", "WEB\n"} {
		if err := ps.CreateProject(ctx, key, "x", "alice"); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("CreateProject(%q) = %v, want ErrInvalid", key, err)
		}
	}
	if err := ps.CreateProject(ctx, "ABCDEFGHIJKLMNOPQRST", "longest key", ""); err != nil {
		t.Fatal(err)
	}

	role, exists, err := ps.Role(ctx, "WEB", "bob")
	if err != nil || role != "" || !exists {
		t.Fatalf("Role(WEB, bob) = %q, %v, %v; want \"\", true", role, exists, err)
	}
	role, exists, err = ps.Role(ctx, "NOPE", "bob")
	if err != nil || role != "" || exists {
		t.Fatalf("Role(NOPE, bob) = %q, %v, %v; want \"\", false", role, exists, err)
	}
	if err := ps.Grant(ctx, "WEB", "bob", "member", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	if role, _, _ := ps.Role(ctx, "WEB", "bob"); role != "member" {
		t.Fatalf("role after grant = %q", role)
	}
	if err := ps.Grant(ctx, "WEB", "bob", "admin", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	if role, _, _ := ps.Role(ctx, "WEB", "bob"); role != "admin" {
		t.Fatalf("role after regrant = %q", role)
	}
	if err := ps.Grant(ctx, "NOPE", "bob", "viewer", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Grant on missing project = %v, want ErrNotFound", err)
	}
	if err := ps.Grant(ctx, "web", "bob", "viewer", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Grant on invalid key = %v, want ErrNotFound", err)
	}
	if err := ps.Grant(ctx, "WEB", "bob", "owner", "human", "alice"); !errors.Is(err, streams.ErrInvalid) {
		t.Fatalf("Grant of bad role = %v, want ErrInvalid", err)
	}
	if err := ps.Grant(ctx, "WEB", "", "viewer", "human", "alice"); !errors.Is(err, streams.ErrInvalid) {
		t.Fatalf("Grant to empty subject = %v, want ErrInvalid", err)
	}
	if err := ps.Revoke(ctx, "WEB", "carol", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Revoke of non-member = %v, want ErrNotFound", err)
	}
	if err := ps.Revoke(ctx, "NOPE", "bob", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("Revoke on missing project = %v, want ErrNotFound", err)
	}
	if err := ps.Revoke(ctx, "WEB", "bob", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	if role, exists, _ := ps.Role(ctx, "WEB", "bob"); role != "" || !exists {
		t.Fatalf("role after revoke = %q, %v", role, exists)
	}
	if err := ps.Revoke(ctx, "WEB", "bob", "human", "alice"); !errors.Is(err, streams.ErrNotFound) {
		t.Fatalf("second Revoke = %v, want ErrNotFound", err)
	}

	// Every change appended its event on the project stream, and failures appended none. The
	// changes were written where the log appends; a log that reads a copy of it is read once
	// the copy has them, as a client reads up to the seq of a snapshot.
	head := writtenHead(t, l)
	evs, err := l.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, 0, head, 100)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ typ, actorKind, actorSubject, payload string }
	var got []row
	for _, e := range evs {
		if e.EntityType != "project" || e.EntityID != "WEB" || e.EntityKey != "WEB" {
			t.Fatalf("event %+v: want entity project WEB", e)
		}
		var p map[string]string
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, row{e.Type, e.ActorKind, e.ActorSubject, fmt.Sprint(p)})
	}
	want := []row{
		{"project.created", "human", "alice", fmt.Sprint(map[string]string{"key": "WEB", "name": "Web site"})},
		{"member.granted", "human", "alice", fmt.Sprint(map[string]string{"subject": "bob", "role": "member"})},
		{"member.granted", "human", "alice", fmt.Sprint(map[string]string{"subject": "bob", "role": "admin"})},
		{"member.revoked", "human", "alice", fmt.Sprint(map[string]string{"subject": "bob"})},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("project events\n got %v\nwant %v", got, want)
	}
	all := readAll(t, l)
	if len(all) != 5 { // the four above and the other project's creation
		t.Fatalf("log holds %d events, want 5", len(all))
	}
	found := false
	for _, e := range all {
		if e.ProjectKey == "ABCDEFGHIJKLMNOPQRST" && e.Type == "project.created" && e.ActorKind == "system" && e.ActorSubject == "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("creation without creator not recorded with a system actor: %+v", all)
	}
}
