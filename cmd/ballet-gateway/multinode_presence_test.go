package main

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/presence"
)

// presence reads k's next presence.changed for sub as (joined, left), failing after d.
func (k *jsonClient) presence(sub string, d time.Duration) (joined, left []string) {
	k.t.Helper()
	deadline := time.Now().Add(d)
	for {
		m := k.next(sub, time.Until(deadline))
		if m == nil {
			k.t.Fatalf("no presence.changed for %s within %v", sub, d)
		}
		if m["method"] != "presence.changed" {
			continue
		}
		p := m["params"].(map[string]any)
		list := func(name string) []string {
			out := []string{}
			for _, x := range p[name].([]any) {
				out = append(out, x.(map[string]any)["subject"].(string))
			}
			return out
		}
		return list("joined"), list("left")
	}
}

func (k *jsonClient) wantPresence(sub string, joined, left []string) {
	k.t.Helper()
	j, l := k.presence(sub, 30*time.Second)
	if !slices.Equal(j, joined) || !slices.Equal(l, left) {
		k.t.Fatalf("presence.changed joined %v left %v, want joined %v left %v", j, l, joined, left)
	}
}

// members answers presence.get project:WEB as "subject×connections ...".
func (k *jsonClient) members() string {
	k.t.Helper()
	res := k.call("presence.get", map[string]any{"stream": "project:WEB"})["result"].(map[string]any)
	s := ""
	for _, m := range res["members"].([]any) {
		m := m.(map[string]any)
		s += fmt.Sprintf("%s×%v ", m["subject"], m["connections"])
	}
	return s
}

// TestPresenceSurvivesReplicaDeath: two `serve` replicas. alice is present through B; B is
// killed and started again at once. The watchers on A hear that alice left the board and
// the item she had open: within 6 s and two presence windows (docs/design.md; 5-6 s
// on a quiet machine), checked with 10 s more for a loaded one. The restarted replica shows
// no ghost, and the dead replica's rows are gone.
func TestPresenceSurvivesReplicaDeath(t *testing.T) {
	c := newCluster(t, 2, "BALLET_DRAIN_WINDOW=1s")
	a, b := c.replicas[0], c.replicas[1]
	restPost(t, a.addr, c.token("alice"), "/api/v1/projects/WEB/items", `{"title":"an open item"}`)
	watcher := c.dialJSON(a, "bob")
	watcher.call("stream.subscribe", map[string]any{"subscription": "w", "stream": "project:WEB", "presence": true})
	watcher.wantPresence("w", []string{"bob"}, []string{})
	items := c.dialJSON(a, "bob") // who has which item open
	items.call("stream.subscribe", map[string]any{"subscription": "it", "stream": "project:WEB", "item_presence": true})
	alice := c.dialJSON(b, "alice")
	alice.call("stream.subscribe", map[string]any{"subscription": "p", "stream": "project:WEB", "presence": true})
	alice.call("stream.subscribe", map[string]any{"subscription": "i", "stream": "item:WEB-1", "presence": true})
	watcher.wantPresence("w", []string{"alice"}, []string{})
	items.wantPresence("it", []string{"alice"}, []string{})
	if got := watcher.members(); got != "alice×1 bob×1 " {
		t.Fatalf("presence.get on A: %s", got)
	}

	if err := b.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	b.p.wait(t, 30*time.Second)
	// Restarted at once, as an orchestrator does: a new process, with a new identity.
	p := start(t, c.env, "serve")
	b = &replica{p: p, addr: p.waitLine(t, listenRe)}
	j, l := watcher.presence("w", 30*time.Second)
	took := time.Since(killed)
	if len(j) != 0 || !slices.Equal(l, []string{"alice"}) {
		t.Fatalf("after the kill: joined %v left %v, want alice left", j, l)
	}
	if bound := 6*time.Second + 2*presence.DefaultWindow + 10*time.Second; took > bound {
		t.Fatalf("alice left %v after the kill, more than %v", took, bound)
	}
	t.Logf("alice left %v after the kill", took)
	if j, l := items.presence("it", 30*time.Second); len(j) != 0 || !slices.Equal(l, []string{"alice"}) {
		t.Fatalf("the item after the kill: joined %v left %v, want alice left", j, l)
	}

	onB := c.dialJSON(b, "bob")
	if got := onB.members(); got != "bob×1 " {
		t.Fatalf("presence.get on the restarted replica: %s", got)
	}
	if got := watcher.members(); got != "bob×1 " {
		t.Fatalf("presence.get on A: %s", got)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var replicas, ghosts int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM presence_replicas), (SELECT count(*) FROM presence_members WHERE subject = 'alice' OR subject LIKE '% alice')`).Scan(&replicas, &ghosts); err != nil {
		t.Fatal(err)
	}
	if replicas != 2 || ghosts != 0 {
		t.Fatalf("%d replica rows (want 2) and %d rows of alice (want 0)", replicas, ghosts)
	}

	// alice comes back through the restarted replica; a replica that stops (SIGTERM)
	// takes her with it as it closes her connection.
	alice = c.dialJSON(b, "alice")
	alice.call("stream.subscribe", map[string]any{"subscription": "p", "stream": "project:WEB", "presence": true})
	watcher.wantPresence("w", []string{"alice"}, []string{})
	if err := b.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	watcher.wantPresence("w", []string{}, []string{"alice"})
	if code := b.p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("replica B exit %d:\n%s", code, b.p.output())
	}
}
