package planner_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/memstore"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/tracker"
	trackermem "github.com/ballet/gateway/tracker/memstore"
)

var root = tracker.Actor{Kind: tracker.ActorHuman, Subject: "root"}

// streaming is a provider whose every turn streams one character every 5 ms for about
// ten seconds, so that output flows while access changes.
func streaming(t testing.TB) provider.Provider {
	t.Helper()
	s, err := provider.ParseScript(strings.NewReader(`{"chunk": 1, "chunk_pause_ms": 5, "rules": [
		{"match": "", "steps": [[{"text": "` + strings.Repeat("x", 2000) + `"}]]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return provider.NewScripted(s)
}

// closedWith reads outputs until the watch's last one and checks that it is OutputClosed
// with reason, and that nothing follows it.
func (w *watcher) closedWith(t testing.TB, session, reason string) {
	t.Helper()
	for {
		o := w.next(t)
		if o.Type == planner.OutputText {
			continue
		}
		if o.Type != planner.OutputClosed || o.Text != reason || o.Session != session {
			t.Fatalf("output %+v, want closed %s", o, reason)
		}
		w.quiet(t, 200*time.Millisecond)
		return
	}
}

func TestCloseWatches(t *testing.T) {
	b := newBackend(t, "memory")
	svc, _ := b.service(t, &planner.Options{Provider: streaming(t)}, nil)
	id := b.newSession(t, svc)
	wa, wv := watch(t, svc, alice, id), watch(t, svc, victor, id)
	if _, err := svc.Send(ctxT(t), alice, id, "go"); err != nil {
		t.Fatal(err)
	}
	wa.until(t, planner.OutputText)
	wv.until(t, planner.OutputText)

	// Victor loses access: his watch ends, alice's goes on.
	if err := b.trk.RemoveMember(ctxT(t), root, "WEB", "victor"); err != nil {
		t.Fatal(err)
	}
	svc.CloseWatches("WEB", "victor", "forbidden")
	wv.closedWith(t, id, "forbidden")
	for range 10 {
		if o := wa.next(t); o.Type != planner.OutputText {
			t.Fatalf("alice's watch after victor's loss: %+v", o)
		}
	}
	if _, _, err := svc.Watch(ctxT(t), victor, id, func(planner.Output) bool { return true }); !errors.Is(err, planner.ErrNotFound) {
		t.Fatalf("Watch after the revocation: %v, want ErrNotFound", err)
	}

	// Another project's loss changes nothing here; this project's ends every watch.
	svc.CloseWatches("OPS", "", "not_found")
	svc.CloseWatches("WEB", "mallory", "forbidden")
	for range 10 {
		if o := wa.next(t); o.Type != planner.OutputText {
			t.Fatalf("alice's watch after other losses: %+v", o)
		}
	}
	svc.CloseWatches("WEB", "", "not_found")
	wa.closedWith(t, id, "not_found")
	if err := svc.Cancel(ctxT(t), alice, id); err != nil {
		t.Fatal(err)
	}
	wa.quiet(t, 200*time.Millisecond)
}

// Outputs still queued when the watcher loses access are never delivered: at most the call
// of fn in progress completes, then comes OutputClosed.
func TestCloseWatchesDropsQueuedOutput(t *testing.T) {
	b := newBackend(t, "memory")
	svc, _ := b.service(t, &planner.Options{Provider: streaming(t)}, nil)
	id := b.newSession(t, svc)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before Close, which waits for fn
	calls := make(chan planner.Output, 100)
	_, stop, err := svc.Watch(ctxT(t), victor, id, func(o planner.Output) bool {
		calls <- o
		<-release
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	other := watch(t, svc, alice, id)
	if _, err := svc.Send(ctxT(t), alice, id, "go"); err != nil {
		t.Fatal(err)
	}
	// The blocked watch holds the outputs the other one received, but the first, in its
	// queue.
	for range 20 {
		other.next(t)
	}
	svc.CloseWatches("WEB", "victor", "forbidden")
	unblock()
	if o := <-calls; o.Type != planner.OutputMessage {
		t.Fatalf("first call %+v", o)
	}
	select {
	case o := <-calls:
		if o.Type != planner.OutputClosed || o.Text != "forbidden" {
			t.Fatalf("call after the loss of access: %+v", o)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no OutputClosed")
	}
	select {
	case o := <-calls:
		t.Fatalf("call after OutputClosed: %+v", o)
	case <-time.After(200 * time.Millisecond):
	}
	if err := svc.Cancel(ctxT(t), alice, id); err != nil {
		t.Fatal(err)
	}
}

// racyRoles answers a project lookup (the last read of an access check) with what it read,
// but lets a revocation commit, and be handled, between the read and the answer: the worst
// moment for a concurrent Watch.
type racyRoles struct {
	tracker.Store
	mu     sync.Mutex
	before func() // runs once, after the next lookup for victor
}

func (r *racyRoles) Project(ctx context.Context, key, subject string) (*tracker.Project, error) {
	p, err := r.Store.Project(ctx, key, subject)
	r.mu.Lock()
	f := r.before
	if subject == "victor" {
		r.before = nil
	}
	r.mu.Unlock()
	if f != nil && subject == "victor" {
		f()
	}
	return p, err
}

// A watch registered while its watcher loses access is ended, even when the access check
// read the role before the revocation.
func TestWatchRacingARevocation(t *testing.T) {
	l := memlog.New()
	t.Cleanup(func() { l.Close() })
	roles := &racyRoles{Store: trackermem.New(l)}
	trk := tracker.NewService(roles, &tracker.Options{AdminSubjects: []string{"root"}})
	ctx := ctxT(t)
	if _, err := trk.CreateProject(ctx, root, "WEB", "web"); err != nil {
		t.Fatal(err)
	}
	for subject, role := range map[string]string{"alice": "member", "victor": "viewer"} {
		if _, err := trk.SetMember(ctx, root, "WEB", subject, role); err != nil {
			t.Fatal(err)
		}
	}
	svc := planner.New(memstore.New(l), trk, &planner.Options{Provider: streaming(t)})
	t.Cleanup(func() { svc.Close() })
	sess, err := svc.CreateSession(ctx, alice, "WEB", "race")
	if err != nil {
		t.Fatal(err)
	}
	// What the gateway does when member.revoked reaches its hub.
	roles.mu.Lock()
	roles.before = func() {
		if err := trk.RemoveMember(ctx, root, "WEB", "victor"); err != nil {
			t.Error(err)
		}
		svc.CloseWatches("WEB", "victor", "forbidden")
	}
	roles.mu.Unlock()
	w := &watcher{ch: make(chan planner.Output, 10000)}
	_, stop, err := svc.Watch(ctx, victor, sess.ID, func(o planner.Output) bool {
		w.ch <- o
		return true
	})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stop()
	if _, err := svc.Send(ctx, alice, sess.ID, "go"); err != nil {
		t.Fatal(err)
	}
	if o := w.next(t); o.Type != planner.OutputClosed || o.Text != "forbidden" {
		t.Fatalf("first output of the revoked watch: %+v", o)
	}
	w.quiet(t, 200*time.Millisecond)
	if err := svc.Cancel(ctx, alice, sess.ID); err != nil {
		t.Fatal(err)
	}
}
