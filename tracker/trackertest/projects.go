package trackertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

func testProjects(t *testing.T, h *harness) {
	ctx := ctxT(t)
	start := h.head()
	p, err := h.svc.CreateProject(ctx, Root, "WEB", "Web site")
	if err != nil {
		t.Fatal(err)
	}
	if p.Key != "WEB" || p.Name != "Web site" || p.Role != "admin" || p.CreatedAt.IsZero() {
		t.Fatalf("created %+v", p)
	}
	evs := h.wantEvents(start, Root, "project.created", "member.granted")
	wantPayload(t, &evs[0], `{"key":"WEB","name":"Web site"}`)
	wantPayload(t, &evs[1], `{"subject":"root","role":"admin"}`)
	for _, e := range evs {
		if e.ProjectKey != "WEB" || e.EntityType != "project" || e.EntityKey != "WEB" {
			t.Fatalf("event %+v", e)
		}
	}
	role, exists, err := h.store.Role(ctx, "WEB", Admin)
	if err != nil || !exists || role != "admin" {
		t.Fatalf("creator's role %q %v %v", role, exists, err)
	}

	before := h.head()
	_, err = h.svc.CreateProject(ctx, Root, "WEB", "again")
	h.wantErr("duplicate project", before, err, tracker.ErrConflict)
	_, err = h.svc.CreateProject(ctx, Alice, "API", "API")
	h.wantErr("project by a non-admin", before, err, tracker.ErrForbidden)
	for _, bad := range [][2]string{{"web", "x"}, {"W-1", "x"}, {"", "x"}, {"TOOLONGPROJECTKEY12345", "x"}, {"API", ""}, {"API", "  "}} {
		_, err = h.svc.CreateProject(ctx, Root, bad[0], bad[1])
		h.wantErr(fmt.Sprintf("project %q %q", bad[0], bad[1]), before, err, tracker.ErrInvalid)
	}

	if _, err := h.svc.CreateProject(ctx, Root, "API", "API"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.SetMember(ctx, Root, "API", "alice", "viewer"); err != nil {
		t.Fatal(err)
	}
	keys := func(ps []tracker.Project) []string {
		var ks []string
		for _, p := range ps {
			ks = append(ks, p.Key+":"+p.Role)
		}
		return ks
	}
	ps, err := h.svc.Projects(ctx, Root)
	if err != nil || !slices.Equal(keys(ps), []string{"API:admin", "WEB:admin"}) {
		t.Fatalf("root's projects %v, %v", keys(ps), err)
	}
	ps, err = h.svc.Projects(ctx, Alice)
	if err != nil || !slices.Equal(keys(ps), []string{"API:viewer"}) {
		t.Fatalf("alice's projects %v, %v", keys(ps), err)
	}
	ps, err = h.svc.Projects(ctx, Eve)
	if err != nil || ps == nil || len(ps) != 0 {
		t.Fatalf("eve's projects %v, %v", ps, err)
	}
	// An admin subject sees projects without a role.
	if err := h.svc.RemoveMember(ctx, Root, "API", Admin); err != nil {
		t.Fatal(err)
	}
	ps, err = h.svc.Projects(ctx, Root)
	if err != nil || !slices.Equal(keys(ps), []string{"API:", "WEB:admin"}) {
		t.Fatalf("root's projects %v, %v", keys(ps), err)
	}
	got, err := h.svc.Project(ctx, Alice, "API")
	if err != nil || got.Name != "API" || got.Role != "viewer" {
		t.Fatalf("alice's API %+v %v", got, err)
	}
	if _, err := h.svc.Project(ctx, Eve, "API"); !errors.Is(err, tracker.ErrForbidden) {
		t.Fatalf("eve's API: %v", err)
	}
	if _, err := h.svc.Project(ctx, Root, "NOPE"); !errors.Is(err, tracker.ErrNotFound) {
		t.Fatalf("NOPE: %v", err)
	}
}

func testMembers(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.project("WEB", Alice)
	start := h.head()
	m, err := h.svc.SetMember(ctx, Alice, "WEB", "bob", "member")
	if err != nil || *m != (tracker.Member{Project: "WEB", Subject: "bob", Role: "member"}) {
		t.Fatalf("set member %+v %v", m, err)
	}
	evs := h.wantEvents(start, Alice, "member.granted")
	wantPayload(t, &evs[0], `{"subject":"bob","role":"member"}`)
	// A change of role is a grant too.
	start = h.head()
	if _, err := h.svc.SetMember(ctx, Root, "WEB", "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	evs = h.wantEvents(start, Root, "member.granted")
	wantPayload(t, &evs[0], `{"subject":"bob","role":"viewer"}`)
	if role, _, _ := h.store.Role(ctx, "WEB", "bob"); role != "viewer" {
		t.Fatalf("bob's role %q", role)
	}

	before := h.head()
	_, err = h.svc.SetMember(ctx, Bob, "WEB", "eve", "viewer")
	h.wantErr("grant by a viewer", before, err, tracker.ErrForbidden)
	_, err = h.svc.SetMember(ctx, Eve, "WEB", "eve", "admin")
	h.wantErr("grant by a stranger", before, err, tracker.ErrForbidden)
	_, err = h.svc.SetMember(ctx, Alice, "WEB", "eve", "owner")
	h.wantErr("bad role", before, err, tracker.ErrInvalid)
	_, err = h.svc.SetMember(ctx, Alice, "WEB", "eve", "")
	h.wantErr("empty role", before, err, tracker.ErrInvalid)
	_, err = h.svc.SetMember(ctx, Alice, "WEB", "", "viewer")
	h.wantErr("empty subject", before, err, tracker.ErrInvalid)
	_, err = h.svc.SetMember(ctx, Root, "NOPE", "eve", "viewer")
	h.wantErr("grant in a missing project", before, err, tracker.ErrNotFound)
	err = h.svc.RemoveMember(ctx, Alice, "WEB", "eve")
	h.wantErr("revoke a non-member", before, err, tracker.ErrNotFound)
	err = h.svc.RemoveMember(ctx, Bob, "WEB", "alice")
	h.wantErr("revoke by a viewer", before, err, tracker.ErrForbidden)

	start = h.head()
	if err := h.svc.RemoveMember(ctx, Alice, "WEB", "bob"); err != nil {
		t.Fatal(err)
	}
	evs = h.wantEvents(start, Alice, "member.revoked")
	wantPayload(t, &evs[0], `{"subject":"bob"}`)
	if role, exists, _ := h.store.Role(ctx, "WEB", "bob"); role != "" || !exists {
		t.Fatalf("bob's role after revoke %q", role)
	}
	// Service actors are recorded as such.
	start = h.head()
	if _, err := h.svc.SetMember(ctx, Alice, "WEB", "bot", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.SetMember(ctx, Bot, "WEB", "bob", "member"); err != nil {
		t.Fatal(err)
	}
	evs = h.eventsAfter(start)
	if len(evs) != 2 || evs[1].ActorKind != "service" || evs[1].ActorSubject != "bot" {
		t.Fatalf("events %+v", evs)
	}
}

func testPermissions(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.project("API", Alice)
	a := h.create(Bob, "WEB", "A")
	b := h.create(Bot, "WEB", "B")
	if _, err := h.svc.GetItem(ctx, Vic, a.Key); err != nil {
		t.Fatalf("viewer reads: %v", err)
	}
	if _, _, err := listAll(ctx, h.svc, Vic, "WEB", tracker.ItemFilter{}); err != nil {
		t.Fatalf("viewer lists: %v", err)
	}
	before := h.head()
	type op struct {
		name string
		f    func(a tracker.Actor) error
	}
	writes := []op{
		{"create", func(x tracker.Actor) error {
			_, err := h.svc.CreateItem(ctx, x, "WEB", tracker.ItemInput{Title: "t"})
			return err
		}},
		{"update", func(x tracker.Actor) error {
			_, err := h.svc.UpdateItem(ctx, x, a.Key, tracker.ItemPatch{Title: ptr("t")}, nil)
			return err
		}},
		{"delete", func(x tracker.Actor) error { return h.svc.DeleteItem(ctx, x, a.Key, nil) }},
		{"add dependency", func(x tracker.Actor) error {
			_, _, err := h.svc.AddDependency(ctx, x, a.Key, b.Key)
			return err
		}},
		{"remove dependency", func(x tracker.Actor) error {
			_, err := h.svc.RemoveDependency(ctx, x, a.Key, b.Key)
			return err
		}},
	}
	reads := []op{
		{"list", func(x tracker.Actor) error {
			_, _, err := listAll(ctx, h.svc, x, "WEB", tracker.ItemFilter{})
			return err
		}},
		{"get", func(x tracker.Actor) error {
			_, err := h.svc.GetItem(ctx, x, a.Key)
			return err
		}},
	}
	for _, w := range writes {
		h.wantErr("viewer "+w.name, before, w.f(Vic), tracker.ErrForbidden)
		h.wantErr("stranger "+w.name, before, w.f(Eve), tracker.ErrForbidden)
		// An admin subject manages members everywhere but writes items only with a role.
		h.wantErr("invalid actor "+w.name, before, w.f(tracker.Actor{Kind: "robot", Subject: "bob"}), tracker.ErrInvalid)
	}
	for _, r := range reads {
		h.wantErr("stranger "+r.name, before, r.f(Eve), tracker.ErrForbidden)
		h.wantErr("no subject "+r.name, before, r.f(tracker.Actor{Kind: "human"}), tracker.ErrInvalid)
	}
	// Unknown projects are not found, for everyone.
	_, _, err := listAll(ctx, h.svc, Eve, "NOPE", tracker.ItemFilter{})
	h.wantErr("list in a missing project", before, err, tracker.ErrNotFound)
	_, err = h.svc.CreateItem(ctx, Bob, "NOPE", tracker.ItemInput{Title: "t"})
	h.wantErr("create in a missing project", before, err, tracker.ErrNotFound)
	_, err = h.svc.GetItem(ctx, Eve, "NOPE-1")
	h.wantErr("get in a missing project", before, err, tracker.ErrNotFound)
	// The role is checked before the item's existence, so strangers learn nothing of items.
	_, err = h.svc.GetItem(ctx, Eve, "WEB-99")
	h.wantErr("stranger gets a missing item", before, err, tracker.ErrForbidden)
	_, err = h.svc.GetItem(ctx, Bob, "API-1")
	h.wantErr("get in another project", before, err, tracker.ErrForbidden)
	// An agent has the permissions of its human: bob is a member.
	if _, err := h.svc.UpdateItem(ctx, Agent, a.Key, tracker.ItemPatch{State: ptr("ready")}, nil); err != nil {
		t.Fatalf("agent for bob: %v", err)
	}
	// Revoking takes effect at once.
	if err := h.svc.RemoveMember(ctx, Alice, "WEB", "bob"); err != nil {
		t.Fatal(err)
	}
	before = h.head()
	_, err = h.svc.GetItem(ctx, Bob, a.Key)
	h.wantErr("revoked member reads", before, err, tracker.ErrForbidden)
	_, err = h.svc.UpdateItem(ctx, Agent, a.Key, tracker.ItemPatch{State: ptr("done")}, nil)
	h.wantErr("agent of a revoked member", before, err, tracker.ErrForbidden)
}

// testForeignProjects: projects made through the log's own project store (the admin command,
// the development seed) work like the tracker's.
func testForeignProjects(t *testing.T, h *harness) {
	ps, ok := h.log.(streams.ProjectStore)
	if !ok {
		t.Skip("the log keeps no projects")
	}
	ctx := ctxT(t)
	if err := ps.CreateProject(ctx, "OPS", "Operations", "someone"); err != nil {
		t.Fatal(err)
	}
	if err := ps.Grant(ctx, "OPS", "bob", "member", "system", "test"); err != nil {
		t.Fatal(err)
	}
	projects, err := h.svc.Projects(ctx, Bob)
	if err != nil || len(projects) != 1 || projects[0].Key != "OPS" || projects[0].Name != "Operations" || projects[0].Role != "member" {
		t.Fatalf("bob's projects %+v %v", projects, err)
	}
	a, b := h.create(Bob, "OPS", "A"), h.create(Bob, "OPS", "B")
	if a.Key != "OPS-1" || b.Key != "OPS-2" {
		t.Fatalf("keys %s %s", a.Key, b.Key)
	}
	h.dep(a.Key, b.Key)
	if err := h.svc.DeleteItem(ctx, Bob, b.Key, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.get(a.Key); len(got.BlockedBy) != 0 || got.Version != 3 {
		t.Fatalf("after the delete %+v", got)
	}
}
