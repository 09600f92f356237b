package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ballet/gateway/protocol"
)

// runPlanner is the planner mode: --turns sessions created over REST, --watchers watches of
// each spread over the replicas of --url other than the one that takes the session's send,
// one message sent on every session at once, and the model's answers (this process serves
// them, --model-listen) followed from each delta's emit to each watcher.
func (b *bench) runPlanner(ctx context.Context, r *report) error {
	cfg := b.cfg
	var id [6]byte
	_, _ = rand.Read(id[:])
	runID := hex.EncodeToString(id[:])
	ln := b.opts.ModelListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.modelListen); err != nil {
			return fmt.Errorf("--model-listen: %w", err)
		}
	}
	deltas := cfg.deltasPerTurn()
	interval := time.Duration(float64(time.Second) / cfg.outputsPerSecond)
	model := startModel(ln, runID, cfg.turns, deltas, interval)
	defer model.close()

	tokens, err := b.senderTokens(ctx)
	if err != nil {
		return err
	}
	b.progress("creating %d planner sessions in %s", cfg.turns, cfg.project)
	t0 := time.Now()
	sessions, err := b.createSessions(ctx, tokens)
	if err != nil {
		return err
	}
	r.add("sessions_s", time.Since(t0).Seconds(), "s")

	// Set before any connection's reader reads it.
	b.watches = newWatchSet(cfg.turns, cfg.watchers, deltas, b.opts.DropDelta)
	nr, nc := len(cfg.urls), cfg.connections
	b.progress("opening %d connections (%d to each of %d replicas)", nr*nc, nc, nr)
	conns, err := b.connectReplicas(ctx)
	if err != nil {
		return err
	}
	var flat []*client
	for _, cs := range conns {
		flat = append(flat, cs...)
	}
	defer closeAll(flat)
	b.progress("opening the senders' connections")
	senders, err := b.connectSenders(ctx, tokens)
	if err != nil {
		return err
	}
	for _, cs := range senders {
		flat = append(flat, cs...)
	}
	defer closeAll(flat)

	b.progress("watching: %d watches", cfg.turns*cfg.watchers)
	if err := b.watchAll(ctx, conns, sessions); err != nil {
		return err
	}

	var before, after int64
	if cfg.dbPID != 0 {
		if before, err = treeTicks(cfg.dbPID); err != nil {
			return err
		}
	}
	b.progress("sending %d messages at once; the answers take %gs", cfg.turns, cfg.turnSeconds)
	sendStart := time.Now()
	sent, sendErrs, sendLat := b.sendAll(ctx, senders, sessions, runID)
	sendS := time.Since(sendStart).Seconds()
	behind := b.waitDone(ctx, sendStart.Add(time.Duration(cfg.turnSeconds*float64(time.Second))))
	if cfg.dbPID != 0 {
		if after, err = treeTicks(cfg.dbPID); err != nil {
			return err
		}
	}
	closeAll(flat)
	model.close()

	r.add("run_id", runID, "")
	r.add("sends", sent, "")
	r.add("sends_s", sendS, "s")
	r.add("send_p50_ms", sendLat.quantile(0.5), "ms")
	r.add("send_max_ms", sendLat.maxMs(), "ms")
	if sendErrs > 0 {
		r.add("send_errors", sendErrs, "")
		r.fail("%d of %d planner.send failed", sendErrs, cfg.turns)
	}
	b.plannerReport(r, model, deltas, behind)
	if cfg.dbPID != 0 {
		t := b.watches.totals(func(int) int64 { return 0 })
		ms := float64(after-before) * 1000 / clockTicks
		r.add("db_cpu_ms", ms, "ms")
		if t.outputs > 0 {
			r.add("db_cpu_us_per_output", ms*1000/float64(t.outputs), "µs")
		}
	}
	b.addConnHealth(r)
	return nil
}

// plannerReport puts what the watchers saw into the report, with its checks.
func (b *bench) plannerReport(r *report, model *modelServer, deltas int, behind int) {
	cfg, ws := b.cfg, b.watches
	t := ws.totals(func(s int) int64 { return model.emitted[s].Load() })
	var emitted int64
	short := 0
	for i := range model.emitted {
		n := model.emitted[i].Load()
		emitted += n
		if n < int64(deltas) {
			short++
		}
	}
	r.add("model_requests", model.requests.Load(), "")
	if first, last := model.firstRequest.Load(), model.lastRequest.Load(); last > first {
		// How far apart the turns began: the sends' effect as the model sees it.
		r.add("model_requests_spread_s", float64(last-first)/1e9, "s")
	}
	r.add("deltas_emitted", emitted, "")
	if first, last := model.firstEmit.Load(), model.lastEmit.Load(); last > first {
		r.add("deltas_emitted_per_s", float64(emitted)/(float64(last-first)/1e9), "deltas/s")
	}
	r.add("deltas_behind_schedule", model.behind.Load(), "")
	r.add("expected_deliveries", t.expected, "")
	r.add("delivered_deltas", t.delivered, "")
	if first, last := ws.firstNs.Load(), ws.lastNs.Load(); last > first {
		r.add("deliveries_per_s", float64(t.delivered)/(float64(last-first)/1e9), "deltas/s")
	}
	r.add("outputs", t.outputs, "")
	r.add("text_outputs_per_watcher", float64(t.textOutputs)/float64(max(len(ws.ws), 1)), "")
	r.add("gaps", t.gaps, "")
	r.add("duplicates", t.dups, "")
	r.add("out_of_order", t.late, "")
	r.add("offset_gaps", t.offsetGaps, "")
	r.add("offset_duplicates", t.offsetDups, "")
	r.add("turns_without_done", cfg.turns-t.ending, "")
	r.add("watchers_without_done", t.noDone, "")
	if len(t.closes) > 0 {
		r.add("watch_closes", t.closes, "")
	}
	addLatencies(r, &ws.lat)
	r.add("latency_method", "watcher receive time minus the model's write time of each delta, one process clock", "")

	checks := []struct {
		n    int64
		what string
	}{
		{t.gaps, "deltas never delivered to a watcher"},
		{t.dups, "deltas delivered twice"},
		{t.late, "deltas delivered out of order"},
		{t.offsetGaps, "offsets skipped"},
		{t.offsetDups, "outputs at an offset already delivered"},
		{t.otherTurns, "outputs of an unexpected turn"},
		{int64(t.noDone), "watchers never heard their turn's done"},
		{int64(t.badDone), "turns ended otherwise than end_turn"},
		{t.errors, "error outputs"},
		{t.afterDone, "outputs after done"},
		{int64(t.closed), "watches closed by the server"},
		{t.junk, "text bytes that were no delta stamp"},
		{int64(short), "answers cut short (the replica left the model's stream)"},
		{model.unknown.Load(), "model requests naming no turn of the run"},
		{int64(behind), "watchers still waiting when the run gave up"},
	}
	for _, c := range checks {
		if c.n > 0 {
			r.fail("%d %s", c.n, c.what)
		}
	}
	if emitted == 0 {
		r.fail("the model emitted no delta")
	}
}

// restBase is the REST root of a replica's /rpc URL.
func restBase(rpc string) string {
	u, _ := url.Parse(rpc)
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	u.Path, u.RawQuery = "", ""
	return strings.TrimSuffix(u.String(), "/")
}

// restConcurrency bounds the session creations in flight.
const restConcurrency = 16

// createSessions creates --turns sessions, spread over the replicas, each by its turn's
// sender, and returns their ids.
func (b *bench) createSessions(ctx context.Context, tokens []string) ([]string, error) {
	cfg := b.cfg
	ids := make([]string, cfg.turns)
	err := forEach(ctx, cfg.turns, restConcurrency, func(ctx context.Context, i int) error {
		u := restBase(cfg.urls[i%len(cfg.urls)]) + "/api/v1/projects/" + url.PathEscape(cfg.project) + "/planner/sessions"
		raw, err := b.rest(ctx, http.MethodPost, u, tokens[b.senderOfTurn(i)],
			map[string]string{"title": fmt.Sprintf("bench %d", i)}, http.StatusCreated)
		var s struct {
			ID string `json:"id"`
		}
		if err == nil && (json.Unmarshal(raw, &s) != nil || s.ID == "") {
			err = fmt.Errorf("POST %s: no session id in %s", u, bytes.TrimSpace(raw))
		}
		if err != nil {
			return fmt.Errorf("create a planner session: %w", err)
		}
		ids[i] = s.ID
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// connectReplicas opens --connections authenticated connections to each replica.
func (b *bench) connectReplicas(ctx context.Context) ([][]*client, error) {
	cfg := b.cfg
	conns := make([][]*client, len(cfg.urls))
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for ri, u := range cfg.urls {
		conns[ri] = make([]*client, cfg.connections)
		for j := range cfg.connections {
			wg.Add(1)
			go func() {
				defer wg.Done()
				idx := ri*cfg.connections + j
				c, err := b.dialAuth(ctx, idx, u, b.token)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("connection %d to %s: %w", idx, u, err)
					}
					return
				}
				conns[ri][j] = c
			}()
		}
	}
	wg.Wait()
	if firstErr != nil {
		for _, cs := range conns {
			closeAll(cs)
		}
		return nil, firstErr
	}
	return conns, nil
}

// dialAuth opens connection idx to u and authenticates it with token, within a minute.
func (b *bench) dialAuth(ctx context.Context, idx int, u, token string) (*client, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := b.dialURL(ctx, idx, u)
	if err != nil {
		return nil, err
	}
	if _, err = c.authSubscribe(ctx, token, "", nil, nil); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// senderOf is the replica that takes session i's send.
func senderOf(i, replicas int) int { return i % replicas }

// watchAll opens every watch: watcher w of session i on the replicas other than its sender's
// in turn (on the sender's when there is one replica), each replica's watches spread over its
// connections in turn.
func (b *bench) watchAll(ctx context.Context, conns [][]*client, sessions []string) error {
	cfg := b.cfg
	nr := len(conns)
	next := make([]int, nr)
	type pending struct {
		k  int
		ch <-chan callResult
	}
	var calls []pending
	for i, s := range sessions {
		sender := senderOf(i, nr)
		for w := range cfg.watchers {
			ri := sender
			if nr > 1 {
				ri = (sender + 1 + w%(nr-1)) % nr
			}
			c := conns[ri][next[ri]%len(conns[ri])]
			next[ri]++
			k := i*cfg.watchers + w
			ch, err := c.send(ctx, protocol.PlannerWatch, map[string]string{"subscription": subID(k), "session": s})
			if err != nil {
				return err
			}
			calls = append(calls, pending{k, ch})
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, p := range calls {
		if _, err := wait(wctx, protocol.PlannerWatch, p.ch); err != nil {
			return fmt.Errorf("watch %d: %w", p.k, err)
		}
	}
	return nil
}

// sendAll sends one message on every session at once, each by its sender on its sender
// replica; it returns the sends answered, those that failed, and the time each took.
func (b *bench) sendAll(ctx context.Context, senders [][]*client, sessions []string, runID string) (int, int, *histogram) {
	nr := len(b.cfg.urls)
	lat := &histogram{}
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for i, s := range sessions {
		c := senders[b.senderOfTurn(i)][senderOf(i, nr)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			t0 := nowNs()
			text := fmt.Sprintf("Answer the benchmark (%s%s-%d).", turnMarker, runID, i)
			ch, err := c.send(sctx, protocol.PlannerSend, map[string]string{"session": s, "text": text})
			if err == nil {
				_, err = wait(sctx, protocol.PlannerSend, ch)
			}
			if err != nil {
				failed.Add(1)
				b.noteError(fmt.Errorf("session %d: %w", i, err))
				return
			}
			lat.record(nowNs() - t0)
			ok.Add(1)
		}()
	}
	wg.Wait()
	return int(ok.Load()), int(failed.Load()), lat
}

// waitDone waits until every watcher heard its done, or, past the answers' expected end, no
// output arrived for --grace; it returns how many watchers were still waiting.
func (b *bench) waitDone(ctx context.Context, end time.Time) int {
	ws := b.watches
	lastProgress, last := time.Now(), int64(-1)
	for {
		n := ws.waiting()
		now := time.Now()
		if p := ws.progress.Load(); p != last {
			last, lastProgress = p, now
		}
		if n == 0 || ctx.Err() != nil || now.Sub(end) > maxCatchUp ||
			(now.After(end) && now.Sub(lastProgress) > b.cfg.grace) {
			return n
		}
		_ = sleepUntil(ctx, now.Add(20*time.Millisecond))
	}
}
