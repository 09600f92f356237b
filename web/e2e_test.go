package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// replayLimit is the gateway's BALLET_REPLAY_LIMIT in the browser test, low
// so that an outage can outlast it cheaply (the e2e script knows it too).
const replayLimit = 40

// plannerMessageBytes and titleChars are the gateway's BALLET_MAX_PLANNER_MESSAGE_BYTES and
// BALLET_MAX_TITLE_CHARS in the browser test, low so that the board meets them cheaply (the
// e2e script knows them too).
const (
	plannerMessageBytes = 200
	titleChars          = 60
)

// raceEnabled is set when the tests run with -race; the gateway is then
// built with it too.
var raceEnabled bool

// chromiumPath finds the browser: $BALLET_CHROMIUM, or Debian's chromium.
func chromiumPath() string {
	if p := os.Getenv("BALLET_CHROMIUM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return "/usr/bin/chromium"
}

// story is the planner's slow answer in the browser test (to "tell a
// story"): a dozen sentences with pauses between them, about five seconds.
var story = []string{
	"Once upon a time a board kept its cards in columns. ",
	"Every card knew its state and who had changed it. ",
	"One day the network dropped in the middle of a sentence. ",
	"The board waited a moment and connected again. ",
	"It asked the planner where it had left off. ",
	"The planner answered from the very next word. ",
	"Nothing was lost, and nothing was said twice. ",
	"A second board opened while the story was told. ",
	"It began at the beginning and caught up at once. ",
	"Both boards ended on the same last word. ",
	"The cards stayed in their columns all along. ",
	"The end.",
}

// TestBrowserBoard drives the board in headless Chromium against a real
// `ballet-gateway dev`: live items across two pages, moves, dependencies,
// the planner chat (also through a dropped connection mid-answer, and on a
// page opened mid-answer), and recovery from dropped connections without
// losing an event. It writes test-artifacts/board.png.
func TestBrowserBoard(t *testing.T) {
	node := nodeModules(t, "playwright-core", "@msgpack/msgpack")
	chromium := chromiumPath()
	_, err := os.Stat(chromium)
	need(t, err == nil, "chromium ("+chromium+")", "apt-get install -y chromium")

	gw := startGateway(t, plannerScript(t))
	proxy := newTCPProxy(t, gw)
	srv := boardServer(t, gw, proxy)

	artifacts, err := filepath.Abs("test-artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/board.e2e.mjs")
	cmd.Env = append(os.Environ(),
		"BOARD_URL="+srv.URL,
		"CHROMIUM="+chromium,
		"ARTIFACTS="+artifacts,
		"REPLAY_LIMIT="+fmt.Sprint(replayLimit),
		"STORY="+strings.Join(story, ""),
		"PLANNER_MESSAGE_BYTES="+fmt.Sprint(plannerMessageBytes),
		"TITLE_CHARS="+fmt.Sprint(titleChars),
	)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("board e2e: %v\n%s\ngateway output:\n%s", err, out, gw.output())
	}
	t.Logf("board e2e:\n%s", out)
}

// gateway is a running `ballet-gateway dev` or `serve`.
type gateway struct {
	addr string // host:port of the client port
	proc *os.Process
	mu   sync.Mutex
	out  strings.Builder
}

func (g *gateway) output() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.String()
}

var bannerRE = regexp.MustCompile(`/rpc:\s+ws://([0-9.:]+)/rpc`)

// plannerScript writes the development planner's script with a rule for
// "story" first, which streams story slowly, and returns its path.
func plannerScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../planner/provider/default_script.json")
	if err != nil {
		t.Fatal(err)
	}
	var script map[string]any
	if err := json.Unmarshal(b, &script); err != nil {
		t.Fatal(err)
	}
	var actions []any
	for i, s := range story {
		if i > 0 {
			actions = append(actions, map[string]any{"pause_ms": 250})
		}
		actions = append(actions, map[string]any{"text": s})
	}
	rule := map[string]any{"match": "story", "steps": []any{actions}}
	script["rules"] = append([]any{rule}, script["rules"].([]any)...)
	if b, err = json.Marshal(script); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "planner-script.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startGateway builds the gateway and runs its dev command on free ports,
// with the planner's script at script.
func startGateway(t *testing.T, script string) *gateway {
	t.Helper()
	cmd := exec.Command(buildGateway(t), "dev")
	return runGateway(t, cmd, []string{"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0",
		"BALLET_REPLAY_LIMIT=" + fmt.Sprint(replayLimit), "BALLET_DRAIN_WINDOW=1s", "BALLET_PLANNER_SCRIPT=" + script,
		"BALLET_MAX_PLANNER_MESSAGE_BYTES=" + fmt.Sprint(plannerMessageBytes), "BALLET_MAX_TITLE_CHARS=" + fmt.Sprint(titleChars)},
		bannerRE)
}

// runGateway starts cmd with env added to the test's, and waits until a line of its output
// matches ready, whose first group is the client port's host:port. The process is
// interrupted (killed after 15 s) when the test ends.
func runGateway(t *testing.T, cmd *exec.Cmd, env []string, ready *regexp.Regexp) *gateway {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gateway{proc: cmd.Process}
	found := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			g.mu.Lock()
			g.out.WriteString(line + "\n")
			g.mu.Unlock()
			if m := ready.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		pw.Close()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		<-done
	})
	select {
	case g.addr = <-found:
	case err := <-exited:
		t.Fatalf("%v exited: %v\n%s", cmd.Args, err, g.output())
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not start:\n%s", cmd.Args, g.output())
	}
	return g
}

// tcpProxy forwards TCP connections to the gateway; Down cuts every
// connection and refuses new ones until Up.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newTCPProxy(t *testing.T, gw *gateway) *tcpProxy {
	p := &tcpProxy{t: t, target: gw.addr, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.Down()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go p.pipe(c)
		}
	}()
}

func (p *tcpProxy) pipe(c net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go cp(up, c)
	go cp(c, up)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Down closes the listener and every connection through the proxy.
func (p *tcpProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// Up listens again on the same address.
func (p *tcpProxy) Up() error {
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// boardServer serves the embedded board as the gateway would, proxying
// /rpc through the TCP proxy and /api/ and /dev/ straight to the gateway;
// POST /__test/proxy/{down,up} cuts and restores /rpc.
func boardServer(t *testing.T, gw *gateway, proxy *tcpProxy) *httptest.Server {
	t.Helper()
	rest := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: gw.addr})
	rpc := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: proxy.addr})
	quiet := func(w http.ResponseWriter, r *http.Request, err error) {
		if !errors.Is(err, context.Canceled) {
			t.Logf("proxy %s: %v", r.URL.Path, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	rest.ErrorHandler, rpc.ErrorHandler = quiet, quiet
	mux := http.NewServeMux()
	mux.Handle("/", Handler())
	mux.Handle("/rpc", rpc)
	mux.Handle("/api/", rest)
	mux.Handle("/dev/", rest)
	mux.HandleFunc("POST /__test/proxy/{op}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("op") {
		case "down":
			proxy.Down()
		case "up":
			if err := proxy.Up(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		default:
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}
