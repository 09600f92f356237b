package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/streams/migrations"
	"github.com/ballet/gateway/streams/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ballet-gateway-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "ballet-gateway")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// childEnv is the environment of a run of the binary: PATH, GORACE and env. The binary is built
// with the race detector, whose runtime sleeps a second at exit (GORACE's atexit_sleep_ms) for
// races other threads are still reporting; the tests wait for dozens of runs to exit, so the
// sleep is off. A race is still reported as it happens and makes the run exit 66.
func childEnv(env []string) []string {
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append([]string{"PATH=" + os.Getenv("PATH"), "GORACE=" + race}, env...)
}

// proc is a running ballet-gateway.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	lines  chan string // stdout and stderr lines as they come
	done   chan error
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...), lines: make(chan string, 10000), done: make(chan error, 1)}
	p.cmd.Env = childEnv(env)
	so, _ := p.cmd.StdoutPipe()
	se, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	pump := func(r io.Reader, buf *bytes.Buffer) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			buf.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}
	wg.Add(2)
	go pump(so, &p.stdout)
	go pump(se, &p.stderr)
	go func() {
		wg.Wait()
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String() + p.stderr.String()
}

// waitLine returns the first submatch of re on an output line.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m[1]
			}
		case <-deadline:
			t.Fatalf("no line matching %v; output:\n%s", re, p.output())
		}
	}
}

func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(timeout):
		t.Fatalf("process did not exit in %v; output:\n%s", timeout, p.output())
		return -1
	}
}

func TestUsageAndConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		code int
		want []string
	}{
		{nil, nil, 2, []string{"usage"}},
		{[]string{"bogus"}, nil, 2, []string{`unknown command "bogus"`}},
		{[]string{"serve"}, nil, 1, []string{"BALLET_DATABASE_URL", "BALLET_OIDC_ISSUER", "BALLET_OIDC_AUDIENCE"}},
		{[]string{"serve"}, []string{"BALLET_HEARTBEAT_INTERVAL=often"}, 1, []string{`BALLET_HEARTBEAT_INTERVAL="often"`}},
		{[]string{"dev"}, []string{"BALLET_REPLAY_LIMIT=0"}, 1, []string{`BALLET_REPLAY_LIMIT="0"`}},
		{[]string{"dev"}, []string{"BALLET_CATCH_UP_LIMIT=0", "BALLET_MAX_CATCH_UPS=some"}, 1,
			[]string{`BALLET_CATCH_UP_LIMIT="0": want an integer of at least 1`, `BALLET_MAX_CATCH_UPS="some"`}},
		{[]string{"dev"}, []string{"BALLET_MAX_SUBSCRIPTIONS=0", "BALLET_REQUEST_RATE=fast", "BALLET_MAX_CONNECTIONS_PER_SUBJECT=-1", "BALLET_MAX_CONNECTIONS=1e6"}, 1,
			[]string{`BALLET_MAX_SUBSCRIPTIONS="0"`, `BALLET_REQUEST_RATE="fast"`, `BALLET_MAX_CONNECTIONS_PER_SUBJECT="-1"`, `BALLET_MAX_CONNECTIONS="1e6"`}},
		{[]string{"dev"}, []string{"BALLET_MAX_CONNECTIONS_PER_IP=0", "BALLET_TRUSTED_PROXIES=10.0.0.0/8,lb.internal"}, 1,
			[]string{`BALLET_MAX_CONNECTIONS_PER_IP="0"`, `BALLET_TRUSTED_PROXIES="10.0.0.0/8,lb.internal": "lb.internal" is not a CIDR`}},
		{[]string{"dev"}, []string{"BALLET_PRESENCE_WINDOW=soon", "BALLET_PRESENCE_MAX_MEMBERS=0"}, 1,
			[]string{`BALLET_PRESENCE_WINDOW="soon"`, `BALLET_PRESENCE_MAX_MEMBERS="0"`}},
		{[]string{"dev"}, []string{"BALLET_SUBJECT_REQUEST_RATE=0", "BALLET_REPLAY_RATE=lots"}, 1,
			[]string{`BALLET_SUBJECT_REQUEST_RATE="0"`, `BALLET_REPLAY_RATE="lots"`}},
		{[]string{"dev"}, []string{"BALLET_CONNECTION_QUEUE_BYTES=1000", "BALLET_REPLICA_QUEUE_BYTES=lots"}, 1,
			[]string{`BALLET_CONNECTION_QUEUE_BYTES="1000": want an integer of at least 65536`, `BALLET_REPLICA_QUEUE_BYTES="lots": want an integer of at least 1048576`}},
		{[]string{"dev"}, []string{"BALLET_ADDR=nonsense"}, 1, []string{`BALLET_ADDR="nonsense"`}},
		{[]string{"dev"}, []string{"BALLET_ALLOWED_ORIGINS=board.example.com,[web"}, 1,
			[]string{`BALLET_ALLOWED_ORIGINS="board.example.com,[web": "[web" is not a pattern (path.Match)`}},
		{[]string{"dev"}, []string{"BALLET_PLANNER_PROVIDER=gpt"}, 1, []string{"BALLET_PLANNER_PROVIDER"}},
		{[]string{"dev"}, []string{"BALLET_LOG_LEVEL=chatty"}, 1, []string{"BALLET_LOG_LEVEL"}},
		{[]string{"dev"}, []string{"BALLET_MAX_TITLE_CHARS=0", "BALLET_MAX_DESCRIPTION_BYTES=2000000", "BALLET_MAX_PLANNER_MESSAGE_BYTES=big",
			"BALLET_PLANNER_TURNS_PER_SUBJECT=0", "BALLET_PLANNER_SESSION_RATE=-5"}, 1,
			[]string{`BALLET_MAX_TITLE_CHARS="0": want an integer from 1 to 10000`, `BALLET_MAX_DESCRIPTION_BYTES="2000000": want an integer from 1 to 1048576`,
				`BALLET_MAX_PLANNER_MESSAGE_BYTES="big"`, `BALLET_PLANNER_TURNS_PER_SUBJECT="0"`, `BALLET_PLANNER_SESSION_RATE="-5"`}},
		{[]string{"migrate"}, nil, 1, []string{"BALLET_DATABASE_URL"}},
		{[]string{"admin", "grant", "WEB", "alice"}, nil, 2, []string{"admin grant takes 3 arguments"}},
		{[]string{"admin", "grant", "WEB", "alice", "owner"}, nil, 2, []string{"want viewer, member or admin"}},
		{[]string{"admin", "sign-out"}, nil, 2, []string{"admin sign-out takes 1 argument", "usage: ballet-gateway admin sign-out SUBJECT"}},
		{[]string{"admin", "block", "alice", "bob"}, nil, 2, []string{"admin block takes 1 argument"}},
	} {
		p := start(t, tc.env, tc.args...)
		code := p.wait(t, 30*time.Second)
		out := p.output()
		if code != tc.code {
			t.Errorf("%v %v: exit %d want %d\n%s", tc.args, tc.env, code, tc.code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v %v: output lacks %q:\n%s", tc.args, tc.env, w, out)
			}
		}
	}
}

var (
	wsURLRe  = regexp.MustCompile(`(ws://[0-9.:]+/rpc)`)
	tokenRe  = regexp.MustCompile(`"token":"([^"]+)"`)
	listenRe = regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`)
	adminRe  = regexp.MustCompile(`admin_addr"?[=:]"?([0-9.]+:[0-9]+)`) // JSON (serve) or text (dev)
)

// adminStatus is the status of GET path on p's admin port.
func adminStatus(t *testing.T, p *proc, path string) int {
	t.Helper()
	// The address is logged on stderr, which may come after the lines of stdout waited for.
	m := adminRe.FindStringSubmatch(p.output())
	for deadline := time.Now().Add(30 * time.Second); m == nil; m = adminRe.FindStringSubmatch(p.output()) {
		if time.Now().After(deadline) {
			t.Fatalf("no admin address in the output:\n%s", p.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get("http://" + m[1] + path)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func wsDial(t *testing.T, url string, c codec.Codec) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{c.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// rpcCall writes one JSON request and reads frames until its response.
func rpcCall(t *testing.T, ws *websocket.Conn, id int, method string, params any) map[string]any {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
		t.Fatal(err)
	}
	for {
		m := readFrame(t, ws)
		if m["method"] != nil {
			stashed[ws] = append(stashed[ws], m)
			continue
		}
		if fmt.Sprint(m["id"]) == fmt.Sprint(id) {
			if m["error"] != nil {
				t.Fatalf("%s: %v", method, m["error"])
			}
			return m
		}
	}
}

// stashed holds notifications read while waiting for a response.
var stashed = map[*websocket.Conn][]map[string]any{}

func readJSON(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	if q := stashed[ws]; len(q) > 0 {
		stashed[ws] = q[1:]
		return q[0]
	}
	return readFrame(t, ws)
}

func readFrame(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDevEndToEndAndSIGTERM(t *testing.T) {
	p := start(t, []string{"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0", "BALLET_DRAIN_WINDOW=1s", "BALLET_PPROF=true"}, "dev")
	url := p.waitLine(t, wsURLRe)
	token := p.waitLine(t, tokenRe)
	// BALLET_PPROF=true serves profiles on the admin port.
	if code := adminStatus(t, p, "/debug/pprof/heap?gc=1"); code != 200 {
		t.Fatalf("/debug/pprof/heap with BALLET_PPROF=true: %d", code)
	}
	if !strings.Contains(p.output(), "NOT FOR PRODUCTION") {
		t.Fatal("dev does not warn that it is not for production")
	}
	// The board is served at /.
	page, err := http.Get(strings.Replace(strings.TrimSuffix(url, "/rpc"), "ws://", "http://", 1) + "/")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(strings.ToLower(string(html)), "<!doctype html") {
		t.Fatalf("GET /: %d %.200s", page.StatusCode, html)
	}
	ws := wsDial(t, url, codec.JSON)
	res := rpcCall(t, ws, 1, "auth", map[string]string{"token": token})
	if res["result"].(map[string]any)["subject"] != "dev-user" {
		t.Fatalf("auth %v", res)
	}
	rpcCall(t, ws, 2, "system.ping", map[string]any{})
	rpcCall(t, ws, 3, "stream.subscribe", map[string]any{"subscription": "s1", "stream": "project:DEMO", "from_seq": 0})
	// The demo project's history replays.
	ev := readJSON(t, ws)
	if ev["method"] != "stream.event" {
		t.Fatalf("got %v", ev)
	}
	// Presence works in the single process.
	rpcCall(t, ws, 4, "stream.subscribe", map[string]any{"subscription": "here", "stream": "item:DEMO-1", "presence": true})
	for {
		m := readJSON(t, ws)
		if m["method"] != "presence.changed" {
			continue
		}
		if p := fmt.Sprint(m["params"]); !strings.Contains(p, "subject:dev-user") {
			t.Fatalf("presence snapshot %s", p)
		}
		break
	}
	res = rpcCall(t, ws, 5, "presence.get", map[string]any{"stream": "item:DEMO-1"})
	if got := fmt.Sprint(res["result"]); got != "map[members:[map[connections:1 subject:dev-user]] stream:item:DEMO-1 truncated:false]" {
		t.Fatalf("presence.get %s", got)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
				t.Fatalf("close %v (%v), want 1001", code, err)
			}
			break
		}
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.output())
	}
	// The drain window, then 5 s for the closes (docs/design.md), and 10 s of slack for
	// a loaded machine.
	if el := time.Since(start); el > time.Second+5*time.Second+10*time.Second {
		t.Fatalf("shutdown took %v", el)
	}
}

func TestServeEndToEnd(t *testing.T) {
	dbURL := pgtest.URL(t)
	iss := authtest.NewIssuer(t)
	env := []string{
		"BALLET_DATABASE_URL=" + dbURL, "BALLET_OIDC_ISSUER=" + iss.URL(), "BALLET_OIDC_AUDIENCE=ballet",
		"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0", "BALLET_DRAIN_WINDOW=1s",
	}
	// serve refuses an unmigrated database and says what to do.
	p := start(t, env, "serve")
	if code := p.wait(t, 30*time.Second); code != 1 || !strings.Contains(p.output(), "ballet-gateway migrate") {
		t.Fatalf("serve on an empty database: exit %d\n%s", code, p.output())
	}
	// migrate from three processes at once applies the schema exactly once.
	var ms []*proc
	for i := 0; i < 3; i++ {
		ms = append(ms, start(t, env, "migrate"))
	}
	applied := 0
	for _, m := range ms {
		if code := m.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("migrate: exit %d\n%s", code, m.output())
		}
		applied += strings.Count(m.output(), "applied ")
	}
	all := ms[0].output() + ms[1].output() + ms[2].output()
	for _, v := range migrations.Versions() {
		if n := strings.Count(all, "applied "+v+"\n"); n != 1 {
			t.Fatalf("migration %s applied %d times:\n%s", v, n, all)
		}
	}
	if applied != len(migrations.Versions()) {
		t.Fatalf("%d migrations applied, want %d", applied, len(migrations.Versions()))
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var versions int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&versions); err != nil || versions != applied {
		t.Fatalf("schema_migrations has %d rows (%v), %d applied", versions, err, applied)
	}
	for _, args := range [][]string{
		{"admin", "project-create", "WEB", "Web site"},
		{"admin", "grant", "WEB", "alice", "member"},
	} {
		a := start(t, env, args...)
		if code := a.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, a.output())
		}
	}
	a := start(t, env, "admin", "project-create", "WEB", "again")
	if code := a.wait(t, 30*time.Second); code != 1 || !strings.Contains(a.output(), "already exists") {
		t.Fatalf("duplicate project: %d %s", code, a.output())
	}

	srv := start(t, env, "serve")
	addr := srv.waitLine(t, listenRe)
	ws := wsDial(t, "ws://"+addr+"/rpc", codec.JSON)
	tok := authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{"ballet"}})
	rpcCall(t, ws, 1, "auth", map[string]string{"token": tok})
	// The tracker's REST API is served on the same port.
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/projects/WEB/items", strings.NewReader(`{"title":"Ship it"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.Contains(string(body), `"key":"WEB-1"`) {
		t.Fatalf("create item: %d %s", resp.StatusCode, body)
	}
	rpcCall(t, ws, 2, "stream.subscribe", map[string]any{"subscription": "s", "stream": "item:WEB-1"})
	if _, err := conn.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
		VALUES ('WEB', 'item.state_changed', 'item', '0199', 'WEB-1', 'human', 'bob', '{"from":"ready","to":"done"}')`); err != nil {
		t.Fatal(err)
	}
	ev := readJSON(t, ws)
	params, _ := ev["params"].(map[string]any)
	if ev["method"] != "stream.event" || params["entity_key"] != "WEB-1" || params["subscription"] != "s" {
		t.Fatalf("got %v", ev)
	}
	// Profiling is off unless BALLET_PPROF says otherwise.
	if code := adminStatus(t, srv, "/debug/pprof/"); code != 404 {
		t.Fatalf("/debug/pprof/ without BALLET_PPROF: %d, want 404", code)
	}
	// Postgres pool statistics are on the admin port.
	admin := adminRe.FindStringSubmatch(srv.output())[1]
	mresp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mbody, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"ballet_gateway_db_pool_max_connections", `ballet_gateway_db_pool_connections{state="idle"}`, "ballet_gateway_log_head"} {
		if !strings.Contains(string(mbody), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Logs are JSON lines, and never carry the token.
	if strings.Contains(srv.output(), tok) {
		t.Fatal("a token was logged")
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, srv.output())
	}
}

// serve runs the collector at defaultGOGC unless GOGC is set.
func TestGCDefault(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	applyGCDefault(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != defaultGOGC {
		t.Errorf("GOGC unset: collector target %d, want %d", got, defaultGOGC)
	}
	applyGCDefault(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: collector target %d, want it left alone", got)
	}
}

// serve holds the runtime to 90 % of the container's memory limit unless GOMEMLIMIT is set or
// the container has none.
func TestMemoryLimitFromTheContainer(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noEnv := func(string) string { return "" }
	v2 := write("memory.max", "1073741824\n")
	if got := applyMemoryLimit(noEnv, []string{filepath.Join(dir, "absent"), v2}); got != 966367641 || debug.SetMemoryLimit(-1) != got {
		t.Fatalf("a 1 GiB container: limit %d", got)
	}
	debug.SetMemoryLimit(prev)
	if got := applyMemoryLimit(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "512MiB"
		}
		return ""
	}, []string{v2}); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Fatalf("GOMEMLIMIT set: limit %d", got)
	}
	// A systemd unit's cgroup is named by /proc/self/cgroup; a container's is "/".
	unit := write("cgroup", "0::/system.slice/ballet-gateway.service\n")
	if got := cgroupMemoryFiles(unit)[0]; got != "/sys/fs/cgroup/system.slice/ballet-gateway.service/memory.max" {
		t.Fatalf("the unit's memory.max: %s", got)
	}
	if got := cgroupMemoryFiles(write("cgroup", "0::/\n"))[0]; got != "/sys/fs/cgroup/memory.max" {
		t.Fatalf("a container's memory.max: %s", got)
	}
	v1 := cgroupMemoryFiles(write("cgroup", "4:memory:/machine/gw\n3:cpu,cpuacct:/machine/gw\n"))
	if v1[0] != "/sys/fs/cgroup/memory/machine/gw/memory.limit_in_bytes" || len(v1) != 3 {
		t.Fatalf("cgroup v1: %v", v1)
	}
	if got := cgroupMemoryFiles(filepath.Join(dir, "absent")); len(got) != 2 {
		t.Fatalf("without /proc/self/cgroup: %v", got)
	}
	for _, none := range []string{"max\n", "9223372036854771712\n", "junk"} {
		if got := applyMemoryLimit(noEnv, []string{write("m", none)}); got != 0 {
			t.Fatalf("%q: limit %d", none, got)
		}
	}
}
