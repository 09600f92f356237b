package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// raceRoles are the roles the server checks, with a hook that runs once, at the next read
// of one subject's role in one project: just before the read, or just after it (the role
// read is then already out of date when the request goes on).
type raceRoles struct {
	gateway.Roles
	mu               sync.Mutex
	project, subject string
	before           bool
	hook             func()
}

func (r *raceRoles) arm(project, subject string, before bool, hook func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.project, r.subject, r.before, r.hook = project, subject, before, hook
}

func (r *raceRoles) Role(ctx context.Context, project, subject string) (string, bool, error) {
	r.mu.Lock()
	hook, before := r.hook, r.before
	if hook != nil && project == r.project && subject == r.subject {
		r.hook = nil
	} else {
		hook = nil
	}
	r.mu.Unlock()
	if hook != nil && before {
		hook()
	}
	role, exists, err := r.Roles.Role(ctx, project, subject)
	if hook != nil && !before {
		hook()
	}
	return role, exists, err
}

// primaryHead is the seq of the last event committed.
func primaryHead(t testing.TB, env *gatewaytest.Env) int64 {
	var head int64
	var err error
	if env.PGLog != nil {
		head, err = env.PGLog.PrimaryHead(context.Background())
	} else {
		head, err = env.Store.Head(context.Background())
	}
	if err != nil {
		t.Error(err)
	}
	return head
}

// waitDispatched waits until the hub has dispatched every event up to seq: the tailer
// moves its position once the hub's Dispatch returns.
func waitDispatched(t testing.TB, env *gatewaytest.Env, seq int64) {
	deadline := time.Now().Add(30 * time.Second)
	for env.Tailer.Position() < seq {
		if time.Now().After(deadline) {
			t.Errorf("the tailer is at %d, not at %d, after 30s", env.Tailer.Position(), seq)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// deleteProject deletes the project and records project.deleted, in one transaction, as
// the part of Core that deletes projects would.
func deleteProject(t testing.TB, env *gatewaytest.Env, key string) {
	err := pgx.BeginFunc(context.Background(), env.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), "DELETE FROM projects WHERE key = $1", key); err != nil {
			return err
		}
		_, err := tx.Exec(context.Background(), `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject)
			VALUES ($1, 'project.deleted', 'project', $1, $1, 'human', 'root')`, key)
		return err
	})
	if err != nil {
		t.Error(err)
	}
}

// A subscribe that races the loss of access to its project never outlives it. The access
// is taken away, and the event that records it dispatched by the hub, right before or
// right after the subscribe reads the subject's role; an event of the stream follows the
// loss at once. Either the subscribe fails (-32003 revoked, -32004 deleted) with no event
// of the stream sent before or after, or the subscription is closed (forbidden,
// not_found) and receives no event recorded after the loss.
func TestSubscribeRacesLossOfAccess(t *testing.T) {
	for _, kind := range []struct {
		name string
		opts gatewaytest.Options
	}{{"memory", gatewaytest.Options{}}, {"postgres", gatewaytest.Options{Postgres: true}}, {"standby", gatewaytest.Options{Standby: true}}} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			roles := &raceRoles{}
			opts := kind.opts
			opts.Roles = func(r gateway.Roles) gateway.Roles { roles.Roles = r; return roles }
			env := gatewaytest.Start(t, &opts)
			env.Project(t, "OPS", "alice", "viewer")
			changes := []string{"revoked"}
			if env.Pool != nil {
				changes = append(changes, "deleted")
			}
			n := 0
			for _, change := range changes {
				for _, item := range []bool{false, true} {
					for _, replay := range []bool{false, true} {
						for _, before := range []bool{false, true} {
							n++
							c, project := codecs[n%2], fmt.Sprintf("P%d", n)
							name := fmt.Sprintf("%s/item=%v/replay=%v/before=%v", change, item, replay, before)
							t.Run(name, func(t *testing.T) {
								subscribeRace(t, env, roles, c, project, change, item, replay, before)
							})
						}
					}
				}
			}
		})
	}
}

func subscribeRace(t *testing.T, env *gatewaytest.Env, roles *raceRoles, c codec.Codec, project, change string, item, replay, before bool) {
	env.Project(t, project, "alice", "viewer", "bob", "viewer")
	key := project + "-1"
	stream := "project:" + project
	if item {
		stream = "item:" + key
	}
	from := primaryHead(t, env)
	appendN(t, env, itemEvent(project, key, "item.updated", 1), itemEvent(project, key, "item.updated", 2))
	alice := login(t, env, c, "alice")
	alice.mustCall("stream.subscribe", map[string]any{"subscription": "ops", "stream": "project:OPS"}, nil)

	var lost atomic.Int64 // the seq of the event that took access away
	roles.arm(project, "alice", before, func() {
		switch change {
		case "revoked":
			if err := env.Store.Revoke(context.Background(), project, "alice", "human", "bob"); err != nil {
				t.Error(err)
			}
		case "deleted":
			deleteProject(t, env, project)
		}
		lost.Store(primaryHead(t, env))
		after, err := env.Store.Append(context.Background(), itemEvent(project, key, "item.updated", 3))
		if err != nil {
			t.Error(err)
		}
		waitDispatched(t, env, after)
	})
	params := map[string]any{"subscription": "s", "stream": stream}
	if replay {
		params["from_seq"] = from
	}
	id := alice.send("stream.subscribe", params)

	// What the connection carries for "s", and where the answer falls among it.
	type note struct {
		method string
		seq    int64
		reason string
	}
	var notes []note
	answer := -1
	var failed *codec.Error
	var last int64 // OPS's event after the answer
	for done := false; !done; {
		m := alice.mustNext()
		if m.IsResponse() {
			if m.ID != id {
				t.Fatalf("unexpected response %+v", m)
			}
			answer, failed = len(notes), m.Error
			// Then an event of the stream, and one of OPS: once alice has OPS's, she
			// would have had the other before it.
			appendN(t, env, itemEvent(project, key, "item.updated", 4))
			last = appendN(t, env, itemEvent("OPS", "OPS-1", "item.updated", 5))
			continue
		}
		var p struct {
			Subscription string `json:"subscription"`
			Seq          int64  `json:"seq"`
			Reason       string `json:"reason"`
		}
		if err := alice.c.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		switch p.Subscription {
		case "s":
			notes = append(notes, note{m.Method, p.Seq, p.Reason})
		case "ops":
			done = last != 0 && m.Method == "stream.event" && p.Seq == last
		default:
			t.Fatalf("%s for %q", m.Method, p.Subscription)
		}
	}
	if t.Failed() {
		return
	}
	if lost.Load() == 0 {
		t.Fatal("the subscribe did not read the role")
	}

	code, reason := -32003, "forbidden"
	if change == "deleted" {
		code, reason = -32004, "not_found"
	}
	if failed != nil {
		if failed.Code != code {
			t.Fatalf("subscribe answered %d %s, want %d", failed.Code, failed.Message, code)
		}
		if len(notes) > 0 {
			t.Fatalf("subscribe answered %d, and the connection carried %+v for the subscription (%d of them before the answer)", code, notes, answer)
		}
		return
	}
	if before {
		t.Fatalf("subscribe succeeded after the loss of access had been recorded and dispatched (carried %+v)", notes)
	}
	closed := -1
	for i, n := range notes {
		switch {
		case closed >= 0:
			t.Fatalf("%+v after stream.closed (all: %+v)", n, notes)
		case n.method == "stream.closed":
			if n.reason != reason {
				t.Fatalf("stream.closed %s, want %s", n.reason, reason)
			}
			closed = i
		case n.method == "stream.event" && n.seq > lost.Load():
			t.Fatalf("event %d, recorded after the loss of access (%d), reached the subscription (all: %+v)", n.seq, lost.Load(), notes)
		}
	}
	if closed < 0 {
		t.Fatalf("the subscription outlived the loss of access (%d): no stream.closed, carried %+v", lost.Load(), notes)
	}
}
