package planner_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/memstore"
	"github.com/ballet/gateway/planner/pgstore"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
	"github.com/ballet/gateway/tracker"
	trackermem "github.com/ballet/gateway/tracker/memstore"
	trackerpg "github.com/ballet/gateway/tracker/pgstore"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// Callers: alice is a member, victor a viewer, mallory no member, bot a member that is no
// person (a client-credentials token).
var (
	alice   = planner.Caller{Subject: "alice", Human: true}
	victor  = planner.Caller{Subject: "victor", Human: true}
	mallory = planner.Caller{Subject: "mallory", Human: true}
	bot     = planner.Caller{Subject: "bot", Human: false}

	aliceActor = tracker.Actor{Kind: tracker.ActorHuman, Subject: "alice"}
)

// testScript drives the scripted provider in these tests. The summarization rule comes
// first: a summarization request quotes the earlier messages, which match other rules. The
// "hello" rule comes next: a message sent after a turn that stored no answer reaches the
// model together with the earlier one, which matches other rules.
const testScript = `{"chunk": 4, "rules": [
	{"match": "summarize the conversation", "steps": [[{"text": "SUMMARY of the earlier talk"}]]},
	{"match": "hello", "steps": [[{"text": "Hello there, friend."}]]},
	{"match": "plan", "steps": [
		[{"text": "Creating the item."}, {"tool": "create_item", "input": {"title": "Alpha"}}],
		[{"text": "Listing."}, {"tool": "list_items", "input": {}}]
	], "final": "All done: {{result}}"},
	{"match": "slow", "steps": [[{"text": "Thinking hard"}, {"pause_ms": 60000}, {"text": " never said"}]]},
	{"match": "toolpause", "steps": [[{"tool": "create_item", "input": {"title": "Beta"}}], [{"pause_ms": 60000}]]},
	{"match": "loop", "steps": [
		[{"tool": "list_items", "input": {}}], [{"tool": "list_items", "input": {}}],
		[{"tool": "list_items", "input": {}}], [{"tool": "list_items", "input": {}}]]},
	{"match": "fail", "steps": [[{"text": "partial"}, {"error": "upstream exploded"}]]},
	{"match": "missing", "steps": [[{"tool": "get_item", "input": {"key": "WEB-999"}}, {"tool": "get_item", "input": {"key": "OPS-1"}}]],
		"final": "Checked: {{result}}"},
	{"match": "", "steps": [[{"text": "Hello there, friend."}]]}
]}`

func script(t testing.TB) *provider.Script {
	t.Helper()
	s, err := provider.ParseScript(strings.NewReader(testScript))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recorder is a provider that passes calls to another and records their requests.
type recorder struct {
	p    provider.Provider
	mu   sync.Mutex
	reqs []provider.Request
	// before, if set, runs before the n-th call (from 1) is passed on.
	before func(n int)
}

func (r *recorder) Name() string  { return r.p.Name() }
func (r *recorder) Model() string { return r.p.Model() }

func (r *recorder) Stream(ctx context.Context, req *provider.Request, onDelta func(provider.Delta) error) (*provider.Response, error) {
	c := *req
	c.Messages = slices.Clone(req.Messages)
	r.mu.Lock()
	r.reqs = append(r.reqs, c)
	n, before := len(r.reqs), r.before
	r.mu.Unlock()
	if before != nil {
		before(n)
	}
	return r.p.Stream(ctx, req, onDelta)
}

func (r *recorder) setBefore(f func(n int)) {
	r.mu.Lock()
	r.before = f
	r.mu.Unlock()
}

func (r *recorder) requests() []provider.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// backend is a tracker and planner store on one event log: memory, or a fresh Postgres
// database.
type backend struct {
	kind  string
	log   streams.Log
	trk   *tracker.Service
	store planner.Store
	pool  *pgxpool.Pool // postgres only
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newBackend(t testing.TB, kind string) *backend {
	t.Helper()
	return newBackendWith(t, kind, nil)
}

// newBackendWith is newBackend with the tracker's options (its admin is "root" whatever they say).
func newBackendWith(t testing.TB, kind string, to *tracker.Options) *backend {
	t.Helper()
	b := &backend{kind: kind}
	var ts tracker.Store
	switch kind {
	case "memory":
		l := memlog.New()
		t.Cleanup(func() { l.Close() })
		b.log, ts, b.store = l, trackermem.New(l), memstore.New(l)
	case "postgres":
		b.pool = pgtest.Pool(t)
		l, err := pglog.Open(ctxT(t), b.pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		b.log, ts, b.store = l, trackerpg.New(b.pool), pgstore.New(b.pool)
	default:
		t.Fatalf("unknown backend %q", kind)
	}
	var opts tracker.Options
	if to != nil {
		opts = *to
	}
	opts.AdminSubjects = []string{"root"}
	b.trk = tracker.NewService(ts, &opts)
	ctx := ctxT(t)
	root := tracker.Actor{Kind: tracker.ActorHuman, Subject: "root"}
	for _, key := range []string{"WEB", "OPS"} {
		if _, err := b.trk.CreateProject(ctx, root, key, key+" project"); err != nil {
			t.Fatal(err)
		}
	}
	for subject, role := range map[string]string{"alice": "member", "victor": "viewer", "bot": "member"} {
		if _, err := b.trk.SetMember(ctx, root, "WEB", subject, role); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.trk.CreateItem(ctx, root, "OPS", tracker.ItemInput{Title: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	return b
}

// bus returns a bus for one replica of the backend, closed at the end of the test.
func (b *backend) bus(t testing.TB) planner.Bus {
	t.Helper()
	if b.kind == "memory" {
		return planner.NewMemoryBus()
	}
	bus, err := pgstore.OpenBus(ctxT(t), b.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	return bus
}

// service returns a replica over the backend, with the test script unless o names a
// provider; it is closed at the end of the test (before its bus).
func (b *backend) service(t testing.TB, o *planner.Options, bus planner.Bus) (*planner.Service, *recorder) {
	t.Helper()
	var opts planner.Options
	if o != nil {
		opts = *o
	}
	if opts.Provider == nil {
		opts.Provider = provider.NewScripted(script(t))
	}
	rec := &recorder{p: opts.Provider}
	opts.Provider = rec
	if bus == nil {
		bus = b.bus(t)
	}
	opts.Bus = bus
	svc := planner.New(b.store, b.trk, &opts)
	t.Cleanup(func() { svc.Close() })
	return svc, rec
}

func (b *backend) newSession(t testing.TB, svc *planner.Service) string {
	t.Helper()
	s, err := svc.CreateSession(ctxT(t), alice, "WEB", "test")
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// forEachBackend runs f on the memory and the Postgres backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b *backend)) {
	for _, kind := range []string{"memory", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, newBackend(t, kind))
		})
	}
}

// watcher collects a watch's output.
type watcher struct {
	ch      chan planner.Output
	stop    func()
	running bool
}

func watch(t testing.TB, svc *planner.Service, c planner.Caller, session string) *watcher {
	t.Helper()
	w, _ := watchFrom(t, svc, c, session, planner.WatchOptions{})
	return w
}

// next returns the next output, failing after a generous wait.
func (w *watcher) next(t testing.TB) planner.Output {
	t.Helper()
	select {
	case o := <-w.ch:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("no output within 30s")
		return planner.Output{}
	}
}

// until reads outputs up to and including the first of type typ.
func (w *watcher) until(t testing.TB, typ string) []planner.Output {
	t.Helper()
	var out []planner.Output
	for {
		o := w.next(t)
		out = append(out, o)
		if o.Type == typ {
			return out
		}
	}
}

// quiet checks that no output arrives for a while.
func (w *watcher) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case o := <-w.ch:
		t.Fatalf("unexpected output %+v", o)
	case <-time.After(d):
	}
}

// shape renders outputs compactly: consecutive text pieces joined, one line per output.
func shape(outs []planner.Output) []string {
	var lines []string
	for _, o := range outs {
		switch o.Type {
		case planner.OutputText:
			if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], "text ") {
				lines[n-1] += o.Text
				continue
			}
			lines = append(lines, "text "+o.Text)
		case planner.OutputToolCall:
			lines = append(lines, "tool_call "+o.Tool+" "+string(o.Input))
		case planner.OutputToolResult:
			e := "ok"
			if o.IsError == nil {
				e = "is_error missing"
			} else if *o.IsError {
				e = "error"
			}
			lines = append(lines, "tool_result "+o.Tool+" "+e)
		case planner.OutputMessage, planner.OutputCompacted:
			lines = append(lines, o.Type+" "+itoa(o.Seq))
		default:
			lines = append(lines, o.Type+" "+o.Text)
		}
	}
	return lines
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func transcript(t testing.TB, svc *planner.Service, session string) []planner.Message {
	t.Helper()
	_, msgs, err := svc.Transcript(ctxT(t), alice, session)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func roles(msgs []planner.Message) string {
	var rs []string
	for _, m := range msgs {
		rs = append(rs, m.Role)
	}
	return strings.Join(rs, " ")
}

// events returns the project's events of typ.
func events(t testing.TB, l streams.Log, project, typ string) []streams.Event {
	t.Helper()
	ctx := ctxT(t)
	head, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := l.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: project}, 0, head, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var out []streams.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls cond until it holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
