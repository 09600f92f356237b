package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/protocol"
)

// contractServer speaks POST /rpc as its wire contract says, each token checked by a real
// verifier, with the open responses of stream.subscribe driven by the test: for the HTTP
// transport's framing, heartbeats, ends and line limits. GET /rpc (a WebSocket upgrade) is
// answered with upgrade, as a proxy that refuses WebSockets does.
type contractServer struct {
	t        testing.TB
	iss      *auth.Issuer
	verifier *auth.Verifier
	srv      *httptest.Server
	beat     time.Duration // heartbeats on open responses
	upgrade  int           // the status a GET is answered with, or upgradeReset, upgradeClosed, upgradeHang
	streams  chan *openStream

	mu       sync.Mutex
	posts    []contractPost
	gets     int
	postDown bool // POSTs are reset, as a network that reaches nothing
}

// contractPost is a POST the server took.
type contractPost struct {
	method string
	params json.RawMessage
	header http.Header
}

// openStream is one stream.subscribe's open response, which the test drives.
type openStream struct {
	sub     string
	fromSeq *int64
	cmds    chan streamCmd
	done    chan struct{} // closed when the response has ended
}

// streamCmd is what the test has an open response do: write line, then end it normally
// (end), cut it (abort), or stop its heartbeats (silence).
type streamCmd struct {
	line                string
	end, abort, silence bool
}

// What a contract server does with a GET instead of answering it: reset its connection, close
// it, or leave it unanswered until the client gives up.
const (
	upgradeReset  = -1
	upgradeClosed = -2
	upgradeHang   = -3
)

func startContract(t testing.TB, beat time.Duration) *contractServer {
	t.Helper()
	cs := &contractServer{t: t, iss: authtest.NewIssuer(t), beat: beat, upgrade: http.StatusForbidden,
		streams: make(chan *openStream, 16)}
	cs.verifier = authtest.NewVerifier(t, cs.iss, "ballet-test")
	cs.srv = httptest.NewServer(http.HandlerFunc(cs.serve))
	t.Cleanup(cs.srv.Close)
	return cs
}

// url is the server's /rpc as a WebSocket address, as clients are given it.
func (cs *contractServer) url() string { return "ws" + strings.TrimPrefix(cs.srv.URL, "http") + "/rpc" }

func (cs *contractServer) mint(subject string, ttl time.Duration) string {
	return authtest.Mint(cs.t, cs.iss, subject, auth.TokenOptions{Audience: []string{"ballet-test"}, TTL: ttl})
}

// minter returns a token source that mints a new token of subject for each call.
func (cs *contractServer) minter(subject string, ttl time.Duration) client.TokenSource {
	return func(context.Context) (string, error) {
		return cs.iss.Mint(subject, auth.TokenOptions{Audience: []string{"ballet-test"}, TTL: ttl})
	}
}

func (cs *contractServer) methods() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]string, len(cs.posts))
	for i, p := range cs.posts {
		out[i] = p.method
	}
	return out
}

func (cs *contractServer) lastPost(method string) contractPost {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i := len(cs.posts) - 1; i >= 0; i-- {
		if cs.posts[i].method == method {
			return cs.posts[i]
		}
	}
	cs.t.Fatalf("no %s POSTed", method)
	return contractPost{}
}

func (cs *contractServer) upgrades() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.gets
}

// next returns the next stream.subscribe's open response.
func (cs *contractServer) next(t testing.TB) *openStream {
	t.Helper()
	select {
	case op := <-cs.streams:
		return op
	case <-time.After(30 * time.Second):
		t.Fatal("no stream.subscribe came")
		return nil
	}
}

// do has the open response carry out c.
func (op *openStream) do(t testing.TB, c streamCmd) {
	t.Helper()
	select {
	case op.cmds <- c:
	case <-op.done:
		t.Fatalf("the response of %s has ended", op.sub)
	case <-time.After(30 * time.Second):
		t.Fatalf("the response of %s takes no command", op.sub)
	}
}

// event writes stream.event seq of sub.
func (op *openStream) event(t testing.TB, seq int64) {
	t.Helper()
	op.do(t, streamCmd{line: fmt.Sprintf(`{"jsonrpc":"2.0","method":"stream.event","params":{"subscription":%q,`+
		`"seq":%d,"type":"test.tick","entity_type":"item","entity_id":"i","entity_key":null,"occurred_at":1,`+
		`"actor":{"kind":"system","subject":"test"},"payload":{"n":%d}}}`, op.sub, seq, seq)})
}

// drop ends a request's connection without an answer: reset, or closed.
func (cs *contractServer) drop(w http.ResponseWriter, reset bool) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		cs.t.Errorf("hijack: %v", err)
		return
	}
	if reset {
		_ = c.(*net.TCPConn).SetLinger(0)
	}
	_ = c.Close()
}

func (cs *contractServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		cs.mu.Lock()
		cs.gets++
		upgrade := cs.upgrade
		cs.mu.Unlock()
		switch upgrade {
		case upgradeReset, upgradeClosed:
			cs.drop(w, upgrade == upgradeReset)
		case upgradeHang:
			<-r.Context().Done()
		default:
			http.Error(w, "no WebSockets here", upgrade)
		}
		return
	}
	cs.mu.Lock()
	down := cs.postDown
	cs.mu.Unlock()
	if down {
		cs.drop(w, true)
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if _, err := cs.verifier.Verify(r.Context(), tok); !ok || err != nil {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("WWW-Authenticate", "Bearer")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, `{"title":"Unauthorized","status":401,"detail":"invalid token (%v)"}`, err)
		return
	}
	p, _ := cs.verifier.Verify(r.Context(), tok)
	var req struct {
		ID     int64           `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	cs.mu.Lock()
	cs.posts = append(cs.posts, contractPost{method: req.Method, params: req.Params, header: r.Header.Clone()})
	cs.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(protocol.HeaderHeartbeatMs, strconv.FormatInt(cs.beat.Milliseconds(), 10))
	fl := w.(http.Flusher)
	write := func(line string) {
		_, _ = fmt.Fprintln(w, line)
		fl.Flush()
	}
	switch req.Method {
	case "system.ping":
		write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"time":%d,"subject":%q}}`, req.ID,
			time.Now().UnixMilli(), p.Subject))
		return
	case "stream.subscribe":
	default:
		write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, req.ID))
		return
	}
	var sp struct {
		Subscription string `json:"subscription"`
		FromSeq      *int64 `json:"from_seq"`
	}
	_ = json.Unmarshal(req.Params, &sp)
	op := &openStream{sub: sp.Subscription, fromSeq: sp.FromSeq, cmds: make(chan streamCmd), done: make(chan struct{})}
	defer close(op.done)
	write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"subscription":%q,"seq":0}}`, req.ID, sp.Subscription))
	select {
	case cs.streams <- op:
	case <-r.Context().Done():
		return
	}
	tick := time.NewTicker(cs.beat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case now := <-tick.C:
			write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/heartbeat","params":{"time":%d}}`, now.UnixMilli()))
		case c := <-op.cmds:
			if c.line != "" {
				write(c.line)
			}
			switch {
			case c.abort:
				panic(http.ErrAbortHandler) // the connection is closed without the body's end
			case c.end:
				return
			case c.silence:
				tick.Stop()
			}
		}
	}
}
