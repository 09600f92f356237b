package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// answer is what the slow script streams, two characters per output, 5 ms
// apart: about 200 text outputs.
var answer = strings.Repeat("abcdefghij", 40)

// startSlowPlanner runs a gateway whose planner streams answer to any
// message, with alice a member of project WEB.
func startSlowPlanner(t *testing.T, pg bool, po planner.Options) (*gatewaytest.Env, string) {
	t.Helper()
	script, err := provider.ParseScript(strings.NewReader(`{"chunk": 2, "chunk_pause_ms": 5, "rules": [
		{"match": "", "steps": [[{"text": "` + answer + `"}]]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: pg, Planner: provider.NewScripted(script), PlannerOptions: po})
	env.Project(t, "WEB", "alice", "member")
	return env, env.Token(t, "alice")
}

// restJSON makes a REST request as tok and decodes the answer into out.
func restJSON(t *testing.T, env *gatewaytest.Env, tok, method, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, env.BaseURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 || json.Unmarshal(b, out) != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
}

func newSession(t *testing.T, env *gatewaytest.Env, tok string) string {
	var s struct {
		ID string `json:"id"`
	}
	restJSON(t, env, tok, "POST", "/api/v1/projects/WEB/planner/sessions", `{"title":"t"}`, &s)
	return s.ID
}

// humanMessages returns the texts of the session's human messages.
func humanMessages(t *testing.T, env *gatewaytest.Env, tok, session string) []string {
	var s struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	restJSON(t, env, tok, "GET", "/api/v1/planner/sessions/"+session, "", &s)
	var out []string
	for _, m := range s.Messages {
		if m.Role == "human" {
			out = append(out, string(m.Content))
		}
	}
	return out
}

// turnReader reads a watch's outputs in the background.
type turnReader struct {
	mu      sync.Mutex
	outputs []client.PlannerOutput
	closed  chan struct{}
}

func readTurn(w *client.Watch) *turnReader {
	r := &turnReader{closed: make(chan struct{})}
	go func() {
		defer close(r.closed)
		for o := range w.Output() {
			r.mu.Lock()
			r.outputs = append(r.outputs, o)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *turnReader) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.outputs)
}

// turn waits for the done of a turn other than skip and returns that turn's
// outputs.
func (r *turnReader) turn(t *testing.T, skip string) []client.PlannerOutput {
	t.Helper()
	var turn string
	waitFor(t, "a turn's done", 30*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, o := range r.outputs {
			if o.Type == client.OutputDone && o.Turn != skip {
				turn = o.Turn
				return true
			}
		}
		return false
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	var outs []client.PlannerOutput
	for _, o := range r.outputs {
		if o.Turn == turn {
			outs = append(outs, o)
		}
	}
	return outs
}

// wait waits for the done of a turn other than skip and returns its text,
// checking that the watch delivered its outputs each once and in order
// from offset first.
func (r *turnReader) wait(t *testing.T, skip string, first int64) string {
	t.Helper()
	var text strings.Builder
	for i, o := range r.turn(t, skip) {
		if o.Offset != first+int64(i) {
			t.Fatalf("output %d: offset %d, want %d", i, o.Offset, first+int64(i))
		}
		if o.Type == client.OutputText {
			text.WriteString(o.Text)
		}
	}
	return text.String()
}

// A watch whose connection drops mid-answer resumes where it was: its
// consumer gets the whole answer exactly once, without OnResume. A watch
// started mid-answer with FromTurnStart gets the whole answer too.
func TestPlannerWatchSurvivesDropMidAnswer(t *testing.T) {
	env, tok := startSlowPlanner(t, true, planner.Options{})
	for _, cr := range carriers {
		t.Run(cr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			session := newSession(t, env, tok)
			p := startProxy(t, env.HTTP.Listener.Addr().String())
			var st states
			c := dial(t, p.URL(), &client.Options{Token: client.StaticToken(tok), Codec: cr.codec, Transport: cr.transport,
				OnStateChange: st.record})
			var resumes atomic.Int32
			w, err := c.PlannerWatch(ctx, session, &client.WatchOptions{OnResume: func(bool) { resumes.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			r := readTurn(w)
			if _, err := c.PlannerSend(ctx, session, "tell me", nil); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the answer to begin", 30*time.Second, func() bool { return r.len() >= 30 })
			late := dial(t, env.URL, &client.Options{Token: client.StaticToken(tok), Codec: cr.codec, Transport: cr.transport})
			lw, err := late.PlannerWatch(ctx, session, &client.WatchOptions{FromTurnStart: true})
			if err != nil {
				t.Fatal(err)
			}
			if !lw.Running() {
				t.Fatal("the late watch sees no turn running")
			}
			lr := readTurn(lw)
			p.Drop()
			if text := r.wait(t, "", 1); text != answer {
				t.Fatalf("the answer through the drop:\n%q\nwant\n%q", text, answer)
			}
			if text := lr.wait(t, "", 1); text != answer {
				t.Fatalf("the answer from the turn's start:\n%q\nwant\n%q", text, answer)
			}
			if n := st.count(client.StateConnected); n != 2 {
				t.Fatalf("connected %d times: the drop did not happen mid-answer", n)
			}
			if n := resumes.Load(); n != 0 {
				t.Fatalf("OnResume called %d times", n)
			}
			if turn, off := w.Position(); turn != r.turn(t, "")[0].Turn || off != int64(r.len()) {
				t.Fatalf("position %q %d after %d outputs", turn, off, r.len())
			}
		})
	}
}

// A send whose answer is lost with its connection is sent again, with the
// same key, on the next connection: one message, one turn.
func TestPlannerSendRetriedAfterLostAnswer(t *testing.T) {
	env, tok := startSlowPlanner(t, false, planner.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session := newSession(t, env, tok)
	watcher := dial(t, env.URL, &client.Options{Token: client.StaticToken(tok)})
	w, err := watcher.PlannerWatch(ctx, session, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := readTurn(w)
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	var st states
	c := dial(t, p.URL(), &client.Options{Token: client.StaticToken(tok), Codec: codec.JSON, OnStateChange: st.record})
	p.Pause() // the request gets through, its answer does not
	type result struct {
		seq int64
		err error
	}
	sent := make(chan result, 1)
	go func() {
		seq, err := c.PlannerSend(ctx, session, "tell me", nil)
		sent <- result{seq, err}
	}()
	waitFor(t, "the message to be stored", 30*time.Second, func() bool { return len(humanMessages(t, env, tok, session)) == 1 })
	p.Drop()
	res := <-sent
	if res.err != nil || res.seq != 1 {
		t.Fatalf("send: seq %d, %v", res.seq, res.err)
	}
	waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) == 2 })
	if n := metric(env, "ballet_gateway_messages_received_total", "method", "planner.send"); n != 2 {
		t.Fatalf("planner.send received %v times, want 2 (sent again once)", n)
	}
	if text := r.wait(t, "", 1); text != answer {
		t.Fatalf("answer %q", text)
	}
	if got := humanMessages(t, env, tok, session); len(got) != 1 || got[0] != `"tell me"` {
		t.Fatalf("human messages %v", got)
	}
	// No second turn follows.
	n := r.len()
	time.Sleep(300 * time.Millisecond)
	if r.len() != n {
		t.Fatalf("%d outputs after the turn", r.len()-n)
	}
	// An explicit key makes a later send count once too.
	o := &client.SendOptions{IdempotencyKey: "release-notes-1"}
	first, err := c.PlannerSend(ctx, session, "again", o)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.PlannerSend(ctx, session, "again", o); err != nil || again != first {
		t.Fatalf("the same key: seq %d, then %d (%v)", first, again, err)
	}
}

// When the server keeps too little of a turn to resume it, OnResume runs
// once and the output goes on live, in order, without a duplicate: the
// server answers resumed: false while the turn runs past what it kept, so
// the client asks once (an older server answered resumed, then closed the
// watch lagging at the hole, and the client asked again for live output).
func TestPlannerWatchKeptTooLittle(t *testing.T) {
	// Each output sent as it is made: outputs gathered over a window can all reach the new
	// watch when the client reconnects within it, and then there is no gap to test.
	env, tok := startSlowPlanner(t, false, planner.Options{TurnOutputs: 5, OutputWindow: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session := newSession(t, env, tok)
	// A watcher straight to the gateway shows how far the turn has gone.
	direct := dial(t, env.URL, &client.Options{Token: client.StaticToken(tok)})
	dw, err := direct.PlannerWatch(ctx, session, nil)
	if err != nil {
		t.Fatal(err)
	}
	dr := readTurn(dw)
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	c := dial(t, p.URL(), &client.Options{Token: client.StaticToken(tok)})
	resumed := make(chan bool, 4)
	w, err := c.PlannerWatch(ctx, session, &client.WatchOptions{OnResume: func(running bool) { resumed <- running }})
	if err != nil {
		t.Fatal(err)
	}
	r := readTurn(w)
	if _, err := c.PlannerSend(ctx, session, "tell me", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer to begin", 30*time.Second, func() bool { return r.len() >= 30 })
	// The outputs made while the link is paused are lost with it: a reconnect quicker than
	// the next output would otherwise miss nothing.
	p.Pause()
	seen := r.len()
	waitFor(t, "the turn to go on past the paused link", 30*time.Second, func() bool { return dr.len() >= seen+10 })
	p.Drop()
	select {
	case running := <-resumed:
		if !running {
			t.Fatal("OnResume: no turn running")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnResume not called")
	}
	outs := r.turn(t, "")
	var text strings.Builder
	for i, o := range outs {
		if i > 0 && o.Offset <= outs[i-1].Offset {
			t.Fatalf("output %d: offset %d after %d", i, o.Offset, outs[i-1].Offset)
		}
		if o.Type == client.OutputText {
			text.WriteString(o.Text)
		}
	}
	if len(text.String()) >= len(answer) {
		t.Fatalf("%d outputs, text of %d characters: want a gap", len(outs), len(text.String()))
	}
	if len(resumed) != 0 {
		t.Fatal("OnResume called more than once")
	}
	if n := metric(env, "ballet_gateway_messages_received_total", "method", "planner.watch"); n != 3 {
		t.Fatalf("planner.watch received %v times, want 3 (the direct watch; the watch, then one resume)", n)
	}
}

// A watch that comes back after its turn ended and expired is told that
// output was missed (resumed: false): OnResume runs with no turn running,
// and the next turn arrives whole.
func TestPlannerWatchResumeExpired(t *testing.T) {
	env, tok := startSlowPlanner(t, false, planner.Options{ResumeWindow: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session := newSession(t, env, tok)
	other := dial(t, env.URL, &client.Options{Token: client.StaticToken(tok)})
	ow, err := other.PlannerWatch(ctx, session, nil)
	if err != nil {
		t.Fatal(err)
	}
	or := readTurn(ow)
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	c := dial(t, p.URL(), &client.Options{Token: client.StaticToken(tok)})
	resumed := make(chan bool, 4)
	w, err := c.PlannerWatch(ctx, session, &client.WatchOptions{OnResume: func(running bool) { resumed <- running }})
	if err != nil {
		t.Fatal(err)
	}
	r := readTurn(w)
	if _, err := c.PlannerSend(ctx, session, "tell me", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer to begin", 30*time.Second, func() bool { return r.len() >= 10 })
	p.Stop()
	first := or.turn(t, "")[0].Turn
	time.Sleep(200 * time.Millisecond) // the ended turn expires
	p.Start()
	select {
	case running := <-resumed:
		if running {
			t.Fatal("OnResume: a turn running")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnResume not called")
	}
	// The next turn arrives whole, from its start.
	if _, err := c.PlannerSend(ctx, session, "again", nil); err != nil {
		t.Fatal(err)
	}
	if text := r.wait(t, first, 1); text != answer {
		t.Fatalf("the next turn: %q", text)
	}
}
