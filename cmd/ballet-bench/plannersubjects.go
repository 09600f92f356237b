package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ballet/gateway/internal/cli"
)

// The planner mode's people: turn i is sent by sender i mod --subjects, who created its
// session. With --subject-token-url the senders are the subjects senderName(0…), each made
// a member of --project by the run's token (which needs the project's admin role); with one
// sender and no such URL, the run's token sends. The watches stay on the run's token.

// subjectPlaceholder is where --subject-token-url takes a sender's name.
const subjectPlaceholder = "{subject}"

// senderRole is the role the senders get: tracker.write, which planner sessions need.
const senderRole = "member"

// senderName is sender j's subject.
func senderName(j int) string { return "bench-" + strconv.Itoa(j) }

// senderOfTurn is the sender of turn i.
func (b *bench) senderOfTurn(i int) int { return i % b.cfg.subjects }

// senderTokens returns every sender's token, the senders made members of --project.
func (b *bench) senderTokens(ctx context.Context) ([]string, error) {
	cfg := b.cfg
	if cfg.subjectTokenURL == "" {
		return []string{b.token}, nil
	}
	b.progress("minting tokens for %d senders and making them %ss of %s", cfg.subjects, senderRole, cfg.project)
	tokens := make([]string, cfg.subjects)
	base := restBase(cfg.urls[0]) + "/api/v1/projects/" + url.PathEscape(cfg.project) + "/members/"
	body := map[string]string{"role": senderRole}
	err := forEach(ctx, cfg.subjects, restConcurrency, func(ctx context.Context, j int) error {
		name := senderName(j)
		u := strings.ReplaceAll(cfg.subjectTokenURL, subjectPlaceholder, url.QueryEscape(name))
		tok, err := cli.TokenFromURL(ctx, "--subject-token-url", u)
		if err != nil {
			return err
		}
		if _, err := b.rest(ctx, http.MethodPut, base+url.PathEscape(name), b.token, body, http.StatusOK); err != nil {
			return fmt.Errorf("make %s a %s: %w", name, senderRole, err)
		}
		tokens[j] = tok
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tokens, nil
}

// connectSenders opens a connection for each sender on each replica that takes one of its
// turns' sends: conns[j][ri], nil where sender j sends nothing on replica ri.
func (b *bench) connectSenders(ctx context.Context, tokens []string) ([][]*client, error) {
	cfg := b.cfg
	nr := len(cfg.urls)
	conns := make([][]*client, len(tokens))
	for j := range conns {
		conns[j] = make([]*client, nr)
	}
	type pair struct{ j, ri int }
	var pairs []pair
	seen := map[pair]bool{}
	// Turns i and i + subjects×replicas have the same sender and replica.
	for i := range min(cfg.turns, len(tokens)*nr) {
		if p := (pair{b.senderOfTurn(i), senderOf(i, nr)}); !seen[p] {
			seen[p] = true
			pairs = append(pairs, p)
		}
	}
	var mu sync.Mutex
	err := forEach(ctx, len(pairs), dialConcurrency, func(ctx context.Context, k int) error {
		p := pairs[k]
		c, err := b.dialAuth(ctx, nr*cfg.connections+k, cfg.urls[p.ri], tokens[p.j])
		if err != nil {
			return fmt.Errorf("sender %s's connection to %s: %w", senderName(p.j), cfg.urls[p.ri], err)
		}
		mu.Lock()
		conns[p.j][p.ri] = c
		mu.Unlock()
		return nil
	})
	if err != nil {
		for _, cs := range conns {
			closeAll(cs)
		}
		return nil, err
	}
	return conns, nil
}

// senderConnections bounds the connections connectSenders opens.
func (c *config) senderConnections() int { return min(c.turns, c.subjects*len(c.urls)) }

// dialConcurrency bounds the sender connections being opened at once.
const dialConcurrency = 64

// forEach calls f(ctx, i) for i in [0, n), at most limit at once; the first error cancels
// the rest and is returned.
func forEach(ctx context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// rest sends one JSON request with token and returns the answer's body, which must have
// status want; a 429 is retried after its Retry-After.
func (b *bench) rest(ctx context.Context, method, u, token string, v any, want int) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	for {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.http.Do(req)
		if err != nil {
			return nil, err
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err := sleepUntil(ctx, time.Now().Add(time.Duration(max(secs, 1))*time.Second)); err != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode != want {
			return nil, fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(raw))
		}
		return raw, nil
	}
}
