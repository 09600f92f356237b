package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/heaptest"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// heapWhileAnswering sends n concurrent GETs of path with token over the gateway's REST
// port and returns how much the live heap grew while every answer was held at its first
// write, and the bodies.
func heapWhileAnswering(t *testing.T, env *gatewaytest.Env, n int, token, path string) (growth int64, bodies [][]byte) {
	t.Helper()
	held := heaptest.NewHolder(n)
	env.SetAPI(held.Wrap(env.API))
	defer env.SetAPI(env.API)
	bodies = make([][]byte, n)
	growth = held.Growth(t, n, time.Minute, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", env.BaseURL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if bodies[i], err = io.ReadAll(resp.Body); err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return nil
	})
	return growth, bodies
}

// The shape of TestSessionListingIsPaged and its bound: a page of 100 sessions of the
// longest titles is about 100 KB of JSON, held as rows, sessions and JSON while it is
// written; four times that per listing.
const (
	listSessions, listClients = 500, 20
	listPageBytes             = 100 << 10
	listHeapGrowth            = listClients * listPageBytes * 4
)

// One person creates 500 planner sessions of the longest titles (BALLET_PLANNER_SESSION_RATE
// raised to let them), then 20 listings of the project's sessions run at once: each answers
// a page of 100, the default limit, with a next, so that while all hold their page the live
// heap grows by less than listHeapGrowth; the whole list would be five times as large.
func TestSessionListingIsPaged(t *testing.T) {
	// The listings in flight of one subject are raised too: the bound of those is
	// TestRESTListingFlood's; this test measures what 20 pages at once hold.
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Planner: provider.NewScripted(nil),
		PlannerOptions: planner.Options{SessionRate: listSessions},
		RESTListings:   httpapi.ListingOptions{PerSubject: listClients, Replica: listClients}})
	env.Project(t, "WEB", "alice", "member")
	alice := env.Token(t, "alice")
	// Created on the planner itself, four at a time: what is measured is the listing.
	title := strings.Repeat("😀", planner.MaxTitle)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < listSessions; i += 4 {
				if _, err := env.Planner.CreateSession(context.Background(), planner.Caller{Subject: "alice", Human: true}, "WEB", title); err != nil {
					t.Errorf("session %d: %v", i+1, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	growth, pages := heapWhileAnswering(t, env, listClients, alice, "/api/v1/projects/WEB/planner/sessions")
	t.Logf("%d concurrent pages of %d bytes: the live heap grew by %.1f MiB while all held their page (bound %.1f MiB)",
		listClients, len(pages[0]), float64(growth)/(1<<20), float64(listHeapGrowth)/(1<<20))
	for i, b := range pages {
		var p struct {
			Sessions []json.RawMessage `json:"sessions"`
			Next     *string           `json:"next"`
		}
		if err := json.Unmarshal(b, &p); err != nil || len(p.Sessions) != 100 || p.Next == nil {
			t.Fatalf("listing %d: %d sessions, next %v (%v); want a page of 100 and a next", i, len(p.Sessions), p.Next, err)
		}
	}
	if growth > listHeapGrowth {
		t.Fatalf("the live heap grew by %d bytes, bound %d", growth, listHeapGrowth)
	}
}

// The shape of TestPlannerSendFlood and its bound: what the four turns that run and the
// refusals of the others may leave on the live heap. (What the limit saves is chiefly paid
// model calls; 1,000 running turns of this script hold about 5 MiB.)
const (
	floodSends, floodConns = 1000, 10
	sendFloodHeapGrowth    = 4 << 20
)

// One person sends 1,000 planner.send at once, on 1,000 sessions, from ten connections:
// BALLET_PLANNER_TURNS_PER_SUBJECT (4) of them start turns, which run on, and the 996 others
// are refused -32029 planner_turns, each counted; the live heap grows by less than
// sendFloodHeapGrowth. (The request budgets are lifted so that every send reaches the
// planner: by default the person's 400 requests a burst would stop the rest first.)
func TestPlannerSendFlood(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(`{"rules": [
		{"match": "slow", "steps": [[{"text": "Thinking"}, {"pause_ms": 600000}, {"text": "never"}]]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := gateway.NewMetrics()
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Planner: provider.NewScripted(script), Metrics: m,
		PlannerOptions: planner.Options{Observer: m.PlannerObserver("scripted"), SessionRate: floodSends}, Config: floodBudgets})
	env.Project(t, "WEB", "alice", "member")
	sessions := make([]string, floodSends)
	alice := planner.Caller{Subject: "alice", Human: true}
	var wg sync.WaitGroup
	errs := make(chan error, floodSends)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < floodSends; i += 4 {
				s, err := env.Planner.CreateSession(context.Background(), alice, "WEB", "")
				if err != nil {
					errs <- err
					return
				}
				sessions[i] = s.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ks := make([]*wsClient, floodConns)
	for i := range ks {
		ks[i] = login(t, env, codecs[i%2], "alice")
	}

	// Every send is written before any answer is read: the replica serves them at once.
	base := heapAfterGC()
	ids := make([][]int64, floodConns)
	for i, k := range ks {
		var params []any
		for j := i; j < floodSends; j += floodConns {
			params = append(params, map[string]any{"session": sessions[j], "text": fmt.Sprint("slow ", j)})
		}
		ids[i] = k.sendAll("planner.send", params)
	}
	answers := make([][]*codec.Message, floodConns)
	for i, k := range ks {
		answers[i] = k.answers(ids[i])
	}
	live := int64(heapAfterGC()) - int64(base)
	started, refused := 0, 0
	for i, as := range answers {
		for _, a := range as {
			if a.Error == nil {
				started++
				continue
			}
			if d := decodeLimit(t, ks[i].c, a.Error); d.Limit != "planner_turns" || d.Max != 4 {
				t.Fatalf("a refused send: data %+v, want planner_turns of 4", d)
			}
			refused++
		}
	}
	t.Logf("%d turns started, %d refused; the live heap grew by %.1f MiB (bound %.0f MiB)",
		started, refused, float64(live)/(1<<20), float64(sendFloodHeapGrowth)/(1<<20))
	if started != 4 || refused != floodSends-4 {
		t.Fatalf("%d turns started and %d refused, want 4 and %d", started, refused, floodSends-4)
	}
	if n := limitRejections(t, env.Server, "planner_turns"); n != floodSends-4 {
		t.Fatalf("planner_turns rejections %v, want %d", n, floodSends-4)
	}
	if live > sendFloodHeapGrowth {
		t.Fatalf("the live heap grew by %d bytes, bound %d", live, sendFloodHeapGrowth)
	}
}
