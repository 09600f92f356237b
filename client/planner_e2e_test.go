package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/protocol"
)

// TestPlannerEndToEnd drives the planner helpers against a real gateway and
// planner: watch, send, the streamed answer with its tool call, done; a
// second send while a turn runs is -32009; cancel ends it.
func TestPlannerEndToEnd(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(`{"chunk": 3, "rules": [
		{"match": "create", "steps": [[{"text": "Creating it."}, {"tool": "create_item", "input": {"title": "{{title}}"}}]], "final": "Created."},
		{"match": "slow", "steps": [[{"text": "Hmm"}, {"pause_ms": 30000}]]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Planner: provider.NewScripted(script)})
	env.Project(t, "WEB", "alice", "member")
	tok := env.Token(t, "alice")
	req, _ := http.NewRequest("POST", env.BaseURL+"/api/v1/projects/WEB/planner/sessions", strings.NewReader(`{"title":"t"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sess struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(body, &sess) != nil {
		t.Fatalf("create session: %d %s", resp.StatusCode, body)
	}
	for _, c := range carriers {
		cl := dial(t, env.URL, &client.Options{Token: client.StaticToken(tok), Codec: c.codec, Transport: c.transport})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w, err := cl.PlannerWatch(ctx, sess.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.PlannerSend(ctx, sess.ID, "create an item called Release notes", nil); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		var tool string
		for o := range w.Output() {
			switch o.Type {
			case "text":
				text.WriteString(o.Text)
			case "tool_call":
				tool = o.Tool
			}
			if o.Type == "done" {
				if o.Text != "end_turn" {
					t.Fatalf("%s: done %q", c.name, o.Text)
				}
				break
			}
		}
		if tool != "create_item" || !strings.Contains(text.String(), "Creating it.") || !strings.Contains(text.String(), "Created.") {
			t.Fatalf("%s: tool %q, text %q", c.name, tool, text.String())
		}
		if _, err := cl.PlannerSend(ctx, sess.ID, "slow", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.PlannerSend(ctx, sess.ID, "again", nil); !errors.Is(err, protocol.ErrConflict) {
			t.Fatalf("%s: second send: %v, want -32009", c.name, err)
		}
		if err := cl.PlannerCancel(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		for o := range w.Output() {
			if o.Type == "done" {
				if o.Text != "cancelled" {
					t.Fatalf("%s: done %q after cancel", c.name, o.Text)
				}
				break
			}
		}
		if err := w.Unsubscribe(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
