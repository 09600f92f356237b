package gateway_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/streams"
)

// answerBound is how long a well-behaved client's system.ping may take
// while another client floods the replica: generous, for a loaded machine.
const answerBound = 10 * time.Second

// cpuSeconds is the CPU time this process (server and clients) has used,
// from /proc/self/stat; 0 where there is none. Only for the logs.
func cpuSeconds() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // from field 3, the state
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return (user + sys) / 100 // USER_HZ
}

// budgetBound is the most a budget of rate per second, in bursts of burst,
// lets through in elapsed.
func budgetBound(burst, rate int, elapsed time.Duration) int {
	return burst + int(elapsed.Seconds()*float64(rate)) + 1
}

// pingFlood is what a connection that sends WebSocket pings as fast as the
// server takes them, reading its pongs, got.
type pingFlood struct {
	pongs   int
	code    int // the server's close code; 0 when it sent none
	reason  string
	elapsed time.Duration // from the first ping to the close
	err     error         // why reading ended without a close
}

// floodPings pings until the server closes the connection (or its
// deadline passes); it must not call t's failing methods.
func (r *rawClient) floodPings() (res pingFlood) {
	_ = r.c.SetDeadline(time.Now().Add(time.Minute))
	batch := bytes.Repeat(clientFrame(9, []byte("p")), 64)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := r.c.Write(batch); err != nil {
				return
			}
		}
	}()
	for {
		op, p, err := readFrame(r.br)
		if err != nil {
			res.err = err
			break
		}
		if op == 0xa {
			res.pongs++
		}
		if op == 0x8 && len(p) >= 2 {
			res.code, res.reason, res.elapsed = int(binary.BigEndian.Uint16(p)), string(p[2:]), time.Since(start)
			break
		}
	}
	close(stop)
	r.c.Close()
	wg.Wait()
	return res
}

// TestPingFlood: WebSocket pings spend the connection's request budget,
// before auth as after. Twenty connections (half of them authenticated)
// ping as fast as the server reads, reading their pongs: each gets no more
// pongs than the budget allows, then, with its refusals spent too, is
// closed 4029 (as it reads, or as the server counts it when the close's bound
// passed before a starved flooder read that far). Meanwhile another client's
// system.ping is answered within answerBound.
func TestPingFlood(t *testing.T) {
	t.Parallel()
	// The connections that do not authenticate are closed for their pings, not for that.
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{AuthTimeout: 5 * time.Minute}})
	rate := gateway.Config{}.WithDefaults().RequestRate
	const flooders = 20
	floods := make([]*rawClient, flooders)
	for i := range floods {
		if i%2 == 1 {
			floods[i] = rawDial(t, env, nil)
			continue
		}
		auth := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, fmt.Sprint("flooder", i)))
		floods[i] = rawDial(t, env, textFrame(auth))
		floods[i].want(1)
	}
	good := login(t, env, codec.JSON, "carol")
	cpu := cpuSeconds()
	start := time.Now()
	results := make([]pingFlood, flooders)
	var wg sync.WaitGroup
	for i, r := range floods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.floodPings()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	pings, slowest := pingWhile(t, good, done)
	elapsed := time.Since(start)
	pongs, unseen := 0, 0
	for i, res := range results {
		if res.code == 0 && res.err != nil {
			// The socket ended before this client read the close frame: the server bounds a
			// close (a second to flush, then the handshake), and on a loaded machine a flooder
			// still reading its pongs can be slower than that. The server's count says how it
			// closed it (below).
			unseen++
			t.Logf("flooder %d: the socket ended (%v) after %d pongs, before the close frame was read", i, res.err, res.pongs)
		} else if res.code != int(gateway.StatusLimitExceeded) || res.reason != "too many pings" {
			t.Errorf("flooder %d (authenticated %v): close %d %q (%v) after %d pongs, want 4029", i, i%2 == 0, res.code, res.reason, res.err, res.pongs)
		}
		if most := budgetBound(2*rate, rate, res.elapsed); res.pongs > most {
			t.Errorf("flooder %d: %d pongs in %v, the budget allows %d", i, res.pongs, res.elapsed, most)
		}
		pongs += res.pongs
	}
	t.Logf("%d flooders: %d pongs in %v; %d system.ping answered meanwhile, the slowest in %v; process CPU %.2f s",
		flooders, pongs, elapsed, pings, slowest, cpuSeconds()-cpu)
	if unseen == flooders {
		t.Errorf("no flooder read its close frame")
	}
	for deadline := time.Now().Add(30 * time.Second); unseen > 0; time.Sleep(10 * time.Millisecond) {
		n, _ := labeledMetric(t, env.Server, "ballet_gateway_closes_total", "code", "4029")
		if n >= flooders {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("closes_total{code=4029} = %v after 30 s, want %d: %d flooders did not read their close", n, flooders, unseen)
			break
		}
	}
	if n := limitRejections(t, env.Server, "pings"); n < float64(flooders*2*rate) {
		t.Errorf("limit_rejections_total{limit=pings} = %v, want at least %d", n, flooders*2*rate)
	}
	// A connection that pings within its budget is answered, and stays.
	k := login(t, env, codec.MsgPack, "dave")
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := k.ws.Ping(ctx)
		cancel()
		if err != nil {
			t.Fatalf("ping within the budget: %v", err)
		}
	}
	k.mustCall("system.ping", nil, nil)
}

// pingWhile is a well-behaved client: it calls system.ping 20 times a
// second, well within its budgets, until done, and returns how many it
// made and the slowest. Each must be answered within answerBound.
func pingWhile(t *testing.T, k *wsClient, done <-chan struct{}) (pings int, slowest time.Duration) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		t0 := time.Now()
		k.mustCall("system.ping", nil, nil)
		d := time.Since(t0)
		if d > answerBound {
			t.Errorf("system.ping of a well-behaved client took %v during the flood, bound %v", d, answerBound)
		}
		pings, slowest = pings+1, max(slowest, d)
		select {
		case <-done:
			return pings, slowest
		case <-tick.C:
		}
	}
}

// exchange sends one request on k and reads up to its response, counting
// the stream.event notifications before it. It does not fail the test, so
// that several goroutines may each use their own client.
func (k *wsClient) exchange(method string, params any) (resp *codec.Message, events int, err error) {
	k.mu.Lock()
	k.nextID++
	id := k.nextID
	k.mu.Unlock()
	raw, err := k.c.Marshal(params)
	if err != nil {
		return nil, 0, err
	}
	frame, err := k.c.Encode(nil, &codec.Message{ID: id, HasID: true, Method: method, Params: raw})
	if err != nil {
		return nil, 0, err
	}
	typ := websocket.MessageText
	if k.c.Binary() {
		typ = websocket.MessageBinary
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.ws.Write(ctx, typ, frame); err != nil {
		return nil, 0, err
	}
	for {
		m, err := k.next(30 * time.Second)
		switch {
		case err != nil:
			return nil, events, err
		case m.Method == protocol.StreamEvent:
			events++
		case m.IsResponse() && m.ID == id:
			return m, events, nil
		}
	}
}

// replayLoop is one connection of a subject that subscribes with from_seq
// and unsubscribes, again and again, until stop.
type replayLoop struct {
	k        *wsClient
	params   map[string]any
	per      int // events each accepted replay delivers
	accepted int // subscribes that replayed
	events   int // stream.event received
	refused  []limitErr
	err      error

	replays, refusals atomic.Int64 // accepted and len(refused), while it runs
}

func (l *replayLoop) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		m, n, err := l.k.exchange("stream.subscribe", l.params)
		if err != nil {
			l.err = err
			return
		}
		l.events += n
		if m.Error != nil {
			var d limitErr
			if m.Error.Code != -32029 || l.k.c.Unmarshal(m.Error.Data, &d) != nil {
				l.err = fmt.Errorf("subscribe: error %d %s", m.Error.Code, m.Error.Message)
				return
			}
			l.refused = append(l.refused, d)
			l.refusals.Add(1)
			continue
		}
		l.accepted++
		l.replays.Add(1)
		// The replay arrives before the answer or after it: all of it before the unsubscribe.
		for l.events < l.accepted*l.per {
			if _, err := l.k.nextEvent(30 * time.Second); err != nil {
				l.err = err
				return
			}
			l.events++
		}
		m, n, err = l.k.exchange("stream.unsubscribe", map[string]any{"subscription": l.params["subscription"]})
		l.events += n
		if err == nil && m.Error != nil {
			err = fmt.Errorf("unsubscribe: error %d %s", m.Error.Code, m.Error.Message)
		}
		if err != nil {
			l.err = err
			return
		}
	}
}

// TestReplayBudget: replays are charged to the subject, across its
// connections, the events they read. A client reconnecting with its
// subscriptions replays what it missed unrefused; then one subject loops
// stream.subscribe with from_seq = head − 999 and stream.unsubscribe on
// four connections, and another on one connection with a types filter that
// selects none of the events (a replay reads them all the same). Their
// subscribes are refused with limit "replay", and the events each
// subject's replays read stay within its budget over the test.
func TestReplayBudget(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{RequestRate: 100_000, SubjectRequestRate: 100_000}})
	env.Project(t, "WEB", "alice", "viewer", "zoe", "viewer")
	def := gateway.Config{}.WithDefaults()
	rate, limit := def.ReplayRate, def.ReplayLimit
	burst := max(2*rate, limit)
	evs := make([]streams.NewEvent, limit)
	for i := range evs {
		evs[i] = itemEvent("WEB", "WEB-1", "item.updated", i)
	}
	head := appendN(t, env, evs...)
	cpu := cpuSeconds()
	start := time.Now()

	// A reconnect: two tabs, four subscriptions each, 200 events behind.
	const subs, behind = 4, 200
	reconnect := 0
	for _, c := range codecs {
		k := login(t, env, c, "alice")
		n := 0
		for i := range subs {
			// Filters that select every event, one each.
			m, got, err := k.exchange("stream.subscribe", map[string]any{"subscription": fmt.Sprint("s", i), "stream": "project:WEB",
				"from_seq": head - behind, "types": []string{"*", fmt.Sprint("n", i)}})
			if err != nil || m.Error != nil {
				t.Fatalf("%s: resubscribe %d: %v %+v", c.Name(), i, err, m)
			}
			n += got
		}
		for ; n < subs*behind; n++ { // events that come after their answer
			k.mustEvent()
		}
		reconnect += n
	}

	// The loops, until every one has been refused and each subject has
	// replayed a few times more than its burst allows.
	from := head - int64(limit) + 1 // limit − 1 events to replay
	var loops []*replayLoop
	for i := range 5 {
		subject, p, per := "alice", map[string]any{"subscription": "r", "stream": "project:WEB", "from_seq": from}, limit-1
		if i == 4 {
			subject, p["types"], per = "zoe", []string{"presence.only"}, 0
		}
		loops = append(loops, &replayLoop{k: login(t, env, codecs[i%2], subject), params: p, per: per})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(stop)
		}()
	}
	replays := func(ls ...*replayLoop) (n int64) {
		for _, l := range ls {
			n += l.replays.Load()
		}
		return n
	}
	refusedAll := func() bool {
		for _, l := range loops {
			if l.refusals.Load() < 2 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if refusedAll() && replays(loops[:4]...) >= 4 && replays(loops[4]) >= 4 {
			break
		}
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	// Each replay of the loops read limit − 1 events; zoe's delivered none.
	read := map[string]int{"alice": reconnect}
	refused := map[string]int{}
	for i, l := range loops {
		if l.err != nil {
			t.Fatalf("loop %d: %v", i, l.err)
		}
		subject, per := "alice", limit-1
		if i == 4 {
			subject, per = "zoe", 0
		}
		if l.events != l.accepted*per {
			t.Errorf("loop %d: %d events for %d replays of %d", i, l.events, l.accepted, per)
		}
		for _, d := range l.refused {
			if d.Limit != "replay" || d.Max != rate || d.RetryAfterMs == nil || *d.RetryAfterMs < 1 || *d.RetryAfterMs > int64(1000*(limit+1)/rate)+1 {
				t.Fatalf("loop %d: data %+v", i, d)
			}
		}
		read[subject] += l.accepted * (limit - 1)
		refused[subject] += len(l.refused)
	}
	t.Logf("in %v: events read by replays %v (%.0f a second for alice), subscribes refused %v; process CPU %.2f s",
		elapsed, read, float64(read["alice"])/elapsed.Seconds(), refused, cpuSeconds()-cpu)
	// The budget, plus the one replay that may overdraw it.
	most := budgetBound(burst, rate, elapsed) + limit
	for _, subject := range []string{"alice", "zoe"} {
		if refused[subject] == 0 {
			t.Errorf("no replay of %s refused", subject)
		}
		if read[subject] > most {
			t.Errorf("%s's replays read %d events in %v; the budget allows %d", subject, read[subject], elapsed, most)
		}
	}
	if n := limitRejections(t, env.Server, "replay"); n < float64(refused["alice"]+refused["zoe"]) {
		t.Errorf("limit_rejections_total{limit=replay} = %v, %v refused here", n, refused)
	}
	// A subscribe without from_seq is not a replay: never refused for it.
	loops[0].k.mustCall("stream.subscribe", map[string]any{"subscription": "live", "stream": "project:WEB", "types": []string{"*"}}, nil)
}

// requestFlood sends n system.ping (or another method) pipelined on k and
// counts the answers; it does not fail the test.
type requestFlood struct {
	ok      int
	refused []limitErr
	err     error
}

func (k *wsClient) flood(n int, method string, params any) (res requestFlood) {
	var frames [][]byte
	for i := range n {
		m := &codec.Message{ID: int64(1_000_000 + i), HasID: true, Method: method}
		if params != nil {
			m.Params, _ = k.c.Marshal(params)
		}
		f, err := k.c.Encode(nil, m)
		if err != nil {
			return requestFlood{err: err}
		}
		frames = append(frames, f)
	}
	typ := websocket.MessageText
	if k.c.Binary() {
		typ = websocket.MessageBinary
	}
	werr := make(chan error, 1)
	go func() {
		for _, f := range frames {
			if err := k.ws.Write(context.Background(), typ, f); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	for got := 0; got < n; {
		m, err := k.next(60 * time.Second)
		if err != nil {
			res.err = err
			break
		}
		if !m.IsResponse() || m.ID < 1_000_000 {
			continue
		}
		got++
		if m.Error == nil {
			res.ok++
			continue
		}
		var d limitErr
		if m.Error.Code != -32029 || k.c.Unmarshal(m.Error.Data, &d) != nil {
			res.err = fmt.Errorf("error %d %s", m.Error.Code, m.Error.Message)
			break
		}
		res.refused = append(res.refused, d)
	}
	if err := <-werr; err != nil && res.err == nil {
		res.err = err
	}
	return res
}

// floodAll runs flood on every client at once and sums what they got,
// checking that each refusal names limit and max; it does not fail the test.
func floodAll(ks []*wsClient, n int, method string, params any, limit string, max int) (ok, refused int, err error) {
	res := make([]requestFlood, len(ks))
	var wg sync.WaitGroup
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = k.flood(n, method, params)
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r.err != nil {
			return 0, 0, fmt.Errorf("connection %d: %w", i, r.err)
		}
		for _, d := range r.refused {
			if d.Limit != limit || d.Max != max || d.RetryAfterMs == nil || *d.RetryAfterMs < 1 || *d.RetryAfterMs > int64(1000/max)+1 {
				return 0, 0, fmt.Errorf("connection %d: data %+v, want limit %q, max %d and retry_after_ms", i, d, limit, max)
			}
		}
		ok, refused = ok+r.ok, refused+len(r.refused)
	}
	return ok, refused, nil
}

// TestSubjectRequestBudget: one subject's ten connections flood system.ping
// together. What they get served is held to the subject's rate (the
// connections' own budgets are ten times as large), the rest is refused
// with limit "subject_requests", and past the refusals' budget the server
// reads no faster. Another subject is served meanwhile, and the subject's
// budgets go with its last connection.
func TestSubjectRequestBudget(t *testing.T) {
	t.Parallel()
	const rate, conns, each = 100, 10, 100
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{RequestRate: 1000, SubjectRequestRate: rate}})
	var ks []*wsClient
	for i := range conns {
		ks = append(ks, login(t, env, codecs[i%2], "bob"))
	}
	good := login(t, env, codec.JSON, "carol")
	cpu := cpuSeconds()
	start := time.Now()
	done := make(chan struct{})
	var ok, refused int
	var ferr error
	go func() {
		defer close(done)
		ok, refused, ferr = floodAll(ks, each, "system.ping", nil, "subject_requests", rate)
	}()
	_, slowest := pingWhile(t, good, done)
	elapsed := time.Since(start)
	t.Logf("%d connections of one subject: %d served, %d refused in %v; another subject's slowest system.ping %v; process CPU %.2f s",
		conns, ok, refused, elapsed, slowest, cpuSeconds()-cpu)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if most := budgetBound(2*rate, rate, elapsed); ok > most {
		t.Fatalf("%d requests of one subject served in %v; its budget allows %d", ok, elapsed, most)
	}
	if ok < 2*rate || ok+refused != conns*each {
		t.Fatalf("%d served, %d refused of %d; the burst is %d", ok, refused, conns*each, 2*rate)
	}
	// Refusals have a budget of the same size, shared like the requests'.
	if least := time.Duration(float64(conns*each-4*rate) / (2 * rate) * 0.9 * float64(time.Second)); elapsed < least {
		t.Fatalf("%d frames handled in %v; the budget allows no less than %v", conns*each, elapsed, least)
	}
	if n := limitRejections(t, env.Server, "subject_requests"); n < float64(refused) {
		t.Fatalf("limit_rejections_total{limit=subject_requests} = %v, %d refused here", n, refused)
	}
	// The connections stay usable, and the subject's budgets live only
	// while it has a connection.
	eventually(t, "bob is served again", func() bool { return ks[0].call("system.ping", nil, nil) == nil })
	if n := gateway.SubjectBudgets(env.Server); n != 2 {
		t.Fatalf("%d subjects have budgets, want bob's and carol's", n)
	}
	for _, k := range ks {
		k.ws.Close(websocket.StatusNormalClosure, "")
	}
	eventually(t, "bob's budgets are freed", func() bool { return gateway.SubjectBudgets(env.Server) == 1 })
}

// TestAuthRefreshSpendsBothBudgets: auth.refresh, which verifies a token,
// spends the connection's request budget and its subject's.
func TestAuthRefreshSpendsBothBudgets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		cfg         gateway.Config
		conns, each int
		limit       string
		rate        int
	}{
		{"connection", gateway.Config{RequestRate: 5, SubjectRequestRate: 10_000}, 1, 30, "requests", 5},
		{"subject", gateway.Config{RequestRate: 10_000, SubjectRequestRate: 5}, 3, 10, "subject_requests", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := gatewaytest.Start(t, &gatewaytest.Options{Config: tc.cfg})
			var ks []*wsClient
			for i := range tc.conns {
				ks = append(ks, login(t, env, codecs[i%2], "erin"))
			}
			token := env.Token(t, "erin")
			start := time.Now()
			ok, refused, err := floodAll(ks, tc.each, "auth.refresh", map[string]string{"token": token}, tc.limit, tc.rate)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d auth.refresh served (each a token verified), %d refused in %v", ok, refused, elapsed)
			if most := budgetBound(2*tc.rate, tc.rate, elapsed); ok > most || refused == 0 {
				t.Fatalf("%d auth.refresh served, %d refused in %v; the budget allows %d", ok, refused, elapsed, most)
			}
		})
	}
}
