package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/operator"
)

// replicaRe is the replica id of the "listening" line.
var replicaRe = regexp.MustCompile(`"msg":"listening".*"replica":"([^"]+)"`)

// listingDoc is GET /api/v1/admin/connections' answer, as a client reads it.
type listingDoc struct {
	Replicas []struct {
		Replica  string
		Answered bool
	}
	Connections []struct {
		Replica, ID, Subject, Codec string
		RemoteAddr                  string  `json:"remote_addr"`
		ClientID                    *string `json:"client_id"`
		ConnectedAt                 string  `json:"connected_at"`
		ExpiresAt                   string  `json:"expires_at"`
		Subscriptions, Watches      int
	}
	Truncated *bool
}

// listing is GET /api/v1/admin/connections with query on r, answered 200 to token.
func (c *cluster) listing(r *replica, query, token string) listingDoc {
	c.t.Helper()
	status, b := c.rest(r, "GET", "/api/v1/admin/connections"+query, token)
	if status != http.StatusOK {
		c.t.Fatalf("GET connections%s: %d %s", query, status, b)
	}
	var doc listingDoc
	if err := json.Unmarshal(b, &doc); err != nil || doc.Truncated == nil {
		c.t.Fatalf("GET connections%s: %v %s", query, err, b)
	}
	return doc
}

// adminOutput runs the command line and returns its stdout.
func (c *cluster) adminOutput(args ...string) string {
	c.t.Helper()
	p := start(c.t, c.env, args...)
	if code := p.wait(c.t, 60*time.Second); code != 0 {
		c.t.Fatalf("%v: exit %d\n%s", args, code, p.output())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// connected is "subject codec replica subscriptions" of each connection, sorted.
func (d listingDoc) connected() []string {
	var out []string
	for _, k := range d.Connections {
		out = append(out, strings.Join([]string{k.Subject, k.Codec, k.Replica, string(rune('0' + k.Subscriptions))}, " "))
	}
	slices.Sort(out)
	return out
}

// TestServeConnectionListing: with three serve processes on one database, an administrator's
// listing through one shows the connections of every replica in both codecs, as each
// replica's session state has them, under the replica ids the replicas log; ?subject= keeps
// one subject's; the command line prints the same as a table or JSON; a replica that is
// stopped is listed as not answering once the wait is over, and the listing still answers.
// Others than administrators get 403.
func TestServeConnectionListing(t *testing.T) {
	c := newCluster(t, 3)
	ids := make([]string, 3)
	for i, r := range c.replicas {
		ids[i] = replicaRe.FindStringSubmatch(r.p.output())[1]
	}
	onFirst := c.dialJSON(c.replicas[0], "alice")
	onFirst.call("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"})
	c.dialJSON(c.replicas[1], "bob")
	tok := c.token("alice")
	mp, err := client.Dial(context.Background(), "ws://"+c.replicas[1].addr+"/rpc", &client.Options{Token: client.StaticToken(tok)})
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	if _, err := mp.Subscribe(context.Background(), "project:WEB", nil); err != nil {
		t.Fatal(err)
	}

	root := c.token("root")
	all := c.listing(c.replicas[2], "", root)
	if len(all.Replicas) != 3 || *all.Truncated {
		t.Fatalf("replicas %+v, truncated %v", all.Replicas, *all.Truncated)
	}
	for _, r := range all.Replicas {
		if !r.Answered || !slices.Contains(ids, r.Replica) {
			t.Fatalf("replica %+v: want one of the logged ids %v, answered", r, ids)
		}
	}
	want := []string{"alice json " + ids[0] + " 1", "alice msgpack " + ids[1] + " 1", "bob json " + ids[1] + " 0"}
	if got := all.connected(); !slices.Equal(got, want) {
		t.Fatalf("connections %v, want %v", got, want)
	}
	for _, k := range all.Connections {
		connected, err1 := time.Parse(time.RFC3339, k.ConnectedAt)
		expires, err2 := time.Parse(time.RFC3339, k.ExpiresAt)
		if err1 != nil || err2 != nil || time.Since(connected) > time.Minute || connected.After(time.Now()) ||
			!expires.After(time.Now()) || !strings.HasPrefix(k.RemoteAddr, "127.0.0.1:") || len(k.ID) != 16 ||
			k.Watches != 0 || k.ClientID != nil {
			t.Fatalf("connection %+v", k)
		}
	}

	alice := c.listing(c.replicas[0], "?subject=alice", root)
	if got := alice.connected(); !slices.Equal(got, want[:2]) {
		t.Fatalf("?subject=alice: %v", got)
	}
	if one := c.listing(c.replicas[0], "?limit=1", root); len(one.Connections) != 1 || !*one.Truncated {
		t.Fatalf("?limit=1: %d connections, truncated %v", len(one.Connections), *one.Truncated)
	}
	for _, who := range []string{"alice", "bob"} {
		if s := c.restStatus(c.replicas[0], "GET", "/api/v1/admin/connections", c.token(who)); s != http.StatusForbidden {
			t.Fatalf("%s lists connections: %d, want 403", who, s)
		}
	}
	if s := c.restStatus(c.replicas[0], "GET", "/api/v1/admin/connections", "not-a-token"); s != http.StatusUnauthorized {
		t.Fatalf("without a valid token: %d, want 401", s)
	}

	var fromCLI listingDoc
	if err := json.Unmarshal([]byte(c.adminOutput("admin", "connections", "alice", "--json")), &fromCLI); err != nil {
		t.Fatal(err)
	}
	if got := fromCLI.connected(); !slices.Equal(got, want[:2]) || len(fromCLI.Replicas) != 3 {
		t.Fatalf("admin connections alice --json: %v, replicas %+v", got, fromCLI.Replicas)
	}
	table := c.adminOutput("admin", "connections")
	for _, s := range append(ids, "REPLICA", `"alice"`, `"bob"`, "msgpack", "\n3 connections\n") {
		if !strings.Contains(table, s) {
			t.Fatalf("admin connections lacks %q:\n%s", s, table)
		}
	}

	stopped := c.replicas[1].p.cmd.Process.Pid
	if err := syscall.Kill(stopped, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(stopped, syscall.SIGCONT) })
	asked := time.Now()
	partial := c.listing(c.replicas[0], "", root)
	// The wait for answers is bounded; the margin is for a loaded machine.
	if d := time.Since(asked); d > operator.ListWait+3*time.Second {
		t.Fatalf("the listing answered after %v, want about %v", d, operator.ListWait)
	}
	for _, r := range partial.Replicas {
		if r.Answered != (r.Replica != ids[1]) {
			t.Fatalf("with replica %s stopped: %+v", ids[1], partial.Replicas)
		}
	}
	if got := partial.connected(); !slices.Equal(got, want[:1]) || len(partial.Replicas) != 3 {
		t.Fatalf("with replica %s stopped: %v", ids[1], got)
	}
	if strings.Contains(c.adminOutput("admin", "connections"), "no: not within") != true {
		t.Fatal("admin connections does not say that a replica did not answer")
	}
}
