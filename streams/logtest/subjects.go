package logtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
)

// testSubjects: sign-outs and blocks are kept per subject with the seq of their event, which
// is appended with them (project key "", entity subject) and parses back to the same change.
func testSubjects(t *testing.T, l streams.Log, _ streams.Appender) {
	ss, _ := l.(streams.SubjectStore)
	if ss == nil {
		t.Skip("the log keeps no sign-outs or blocks")
	}
	ctx := ctxT(t)
	before := time.Now().Unix()
	out, err := ss.ChangeSubject(ctx, streams.EventSubjectSignedOut, "alice", "human", "root")
	if err != nil {
		t.Fatal(err)
	}
	if out.Subject != "alice" || out.SignedOutAt < before || out.SignedOutAt > time.Now().Unix() || out.Blocked || out.Seq == 0 {
		t.Fatalf("sign-out: %+v", out)
	}
	blocked, err := ss.ChangeSubject(ctx, streams.EventSubjectBlocked, "alice", "system", "ballet-gateway admin")
	if err != nil {
		t.Fatal(err)
	}
	if !blocked.Blocked || blocked.SignedOutAt != out.SignedOutAt || blocked.Seq <= out.Seq {
		t.Fatalf("block after the sign-out: %+v", blocked)
	}
	bob, err := ss.ChangeSubject(ctx, streams.EventSubjectBlocked, "bob", "human", "root")
	if err != nil {
		t.Fatal(err)
	}
	unblocked, err := ss.ChangeSubject(ctx, streams.EventSubjectUnblocked, "bob", "human", "root")
	if err != nil || unblocked.Blocked || unblocked.SignedOutAt != 0 || unblocked.Seq <= bob.Seq {
		t.Fatalf("unblock: %+v, %v", unblocked, err)
	}
	for _, bad := range []struct{ typ, subject string }{
		{"subject.deleted", "carol"}, {streams.EventSubjectBlocked, ""},
		{streams.EventSubjectBlocked, "a\x00b"}, {streams.EventSubjectBlocked, strings.Repeat("c", 256)},
	} {
		if _, err := ss.ChangeSubject(ctx, bad.typ, bad.subject, "human", "root"); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("ChangeSubject(%q, %q) = %v, want ErrInvalid", bad.typ, bad.subject, err)
		}
	}

	cs, err := ss.SubjectControls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]streams.SubjectControl{}
	for _, c := range cs {
		got[c.Subject] = c
	}
	if len(got) != 2 || got["alice"] != blocked || got["bob"] != unblocked {
		t.Fatalf("SubjectControls = %+v, want alice %+v and bob %+v", cs, blocked, unblocked)
	}
	evs := readAll(t, l)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4 (the invalid changes append nothing)", len(evs))
	}
	for i, want := range []streams.SubjectControl{out, blocked, bob, unblocked} {
		c, ok := streams.SubjectChange(&evs[i])
		e := evs[i]
		if !ok || e.ProjectKey != "" || e.EntityType != "subject" || e.EntityID != want.Subject || e.Seq != want.Seq ||
			c.Subject != want.Subject || c.Blocked != (e.Type == streams.EventSubjectBlocked) ||
			(e.Type == streams.EventSubjectSignedOut) != (c.SignedOutAt == want.SignedOutAt && c.SignedOutAt != 0) {
			t.Errorf("event %d %s %s: %+v, want the change %+v", e.Seq, e.Type, e.Payload, c, want)
		}
	}
	if evs[1].ActorKind != "system" || evs[1].ActorSubject != "ballet-gateway admin" {
		t.Errorf("the block's actor %s/%s", evs[1].ActorKind, evs[1].ActorSubject)
	}
}
