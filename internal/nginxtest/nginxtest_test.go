package nginxtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// upstream is a replica stand-in that remembers the requests it was sent.
type upstream struct {
	srv *httptest.Server

	mu   sync.Mutex
	seen []*http.Request // headers and host of each request, bodies read
	body []string
}

func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		u.mu.Lock()
		u.seen = append(u.seen, r.Clone(context.Background()))
		u.body = append(u.body, string(b))
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "upstream")
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) addr() string { return u.srv.Listener.Addr().String() }

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.seen...)
}

func get(t *testing.T, p *Proxy, path string) *http.Response {
	t.Helper()
	resp, err := p.Client().Get(p.URL() + path)
	if err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, p.Logs())
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func dialWebSocket(t *testing.T, p *Proxy) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(p.URL(), "http") + "/rpc"
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: p.Client()})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return c, resp, err
}

// A proxy that blocks WebSockets answers the upgrade 403 itself (Refuse), or ends its
// connection without an answer (Close); the replica never sees it, while a plain request
// still reaches the replica.
func TestUpgradesStopAtTheProxy(t *testing.T) {
	for _, tc := range []struct {
		mode   WebSocketMode
		status int // of the upgrade's answer; 0: none
	}{{Refuse, http.StatusForbidden}, {Close, 0}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			up := newUpstream(t, nil)
			p := Start(t, Options{Upstreams: []string{up.addr()}, WebSocket: tc.mode})

			c, resp, err := dialWebSocket(t, p)
			if err == nil {
				c.CloseNow()
				t.Fatal("the upgrade went through the proxy")
			}
			if (resp == nil && tc.status != 0) || (resp != nil && resp.StatusCode != tc.status) {
				t.Fatalf("upgrade: want status %d (0: no answer), got %v (%v)", tc.status, resp, err)
			}
			if n := len(up.requests()); n != 0 {
				t.Fatalf("the replica saw %d requests of a stopped upgrade", n)
			}
			if resp := get(t, p, "/rpc"); resp.StatusCode != http.StatusOK {
				t.Fatalf("plain GET through the proxy: %s", resp.Status)
			}
			if n := len(up.requests()); n != 1 {
				t.Fatalf("the replica saw %d requests, want the plain GET", n)
			}
		})
	}
}

// nginx's default drops the hop-by-hop upgrade headers: the replica sees a plain GET.
func TestStripForwardsAPlainGet(t *testing.T) {
	up := newUpstream(t, nil)
	p := Start(t, Options{Upstreams: []string{up.addr()}, WebSocket: Strip})

	c, resp, err := dialWebSocket(t, p)
	if err == nil {
		c.CloseNow()
		t.Fatal("the upgrade went through a stripping proxy")
	}
	if resp == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("upgrade: want the replica's 200 to a plain GET, got %v (%v)", resp, err)
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("the replica saw %d requests, want 1", len(seen))
	}
	r := seen[0]
	if r.Header.Get("Upgrade") != "" || strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
		t.Fatalf("the replica saw Upgrade %q, Connection %q", r.Header.Get("Upgrade"), r.Header.Get("Connection"))
	}
	if r.Method != http.MethodGet || r.URL.Path != "/rpc" {
		t.Fatalf("the replica saw %s %s", r.Method, r.URL.Path)
	}
}

// A WebSocket-capable proxy passes the handshake and the messages.
func TestPassCarriesWebSockets(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		_ = c.Write(r.Context(), typ, append([]byte("echo "), msg...))
		_, _, _ = c.Read(r.Context()) // until the client closes
	})
	p := Start(t, Options{Upstreams: []string{up.addr()}, WebSocket: Pass})

	c, _, err := dialWebSocket(t, p)
	if err != nil {
		t.Fatalf("upgrade through a passing proxy: %v\n%s", err, p.Logs())
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if err != nil || string(msg) != "echo hello" {
		t.Fatalf("read %q, %v", msg, err)
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
}

// streamingUpstream writes a line (flushed or not), then holds the response open until release
// is closed, then writes a second line and ends.
func streamingUpstream(t *testing.T, noBuffering, flush bool) (*upstream, chan struct{}) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		if noBuffering {
			w.Header().Set("X-Accel-Buffering", "no")
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the headers, so that only the line can be held back
		_, _ = io.WriteString(w, `{"line":1}`+"\n")
		if flush {
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `{"line":2}`+"\n")
	})
	return up, release
}

// streamRequest sends a POST over a connection of its own and returns the response, whose body
// reads are bounded by the connection's read deadline.
func streamRequest(t *testing.T, p *Proxy) (net.Conn, *http.Response) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/rpc", strings.NewReader(`{"jsonrpc":"2.0"}`))
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("response: %v\n%s", err, p.Logs())
	}
	return conn, resp
}

// A streamed response marked X-Accel-Buffering: no arrives line by line whether the proxy
// buffers or not. A line the upstream holds back is not read (which shows the measurement can
// fail).
//
// nginx 1.22 passes a flushed chunk on at once even with proxy_buffering on and no header; the
// header is what keeps a stream unbuffered whatever nginx's version or settings.
func TestStreamedResponseArrivesLineByLine(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		buffering, noBuffering bool
		held                   bool // the upstream does not flush its first line
	}{
		{"buffering on, X-Accel-Buffering no", true, true, false},
		{"buffering off, X-Accel-Buffering no", false, true, false},
		{"buffering on, not flushed", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, release := streamingUpstream(t, tc.noBuffering, !tc.held)
			p := Start(t, Options{Upstreams: []string{up.addr()}, Buffering: tc.buffering})
			conn, resp := streamRequest(t, p)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %s", resp.Status)
			}
			body := bufio.NewReader(resp.Body)

			wait := 5 * time.Second
			if tc.held {
				wait = time.Second
			}
			_ = conn.SetReadDeadline(time.Now().Add(wait))
			line, err := body.ReadString('\n')
			if tc.held {
				var ne net.Error
				if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("a line the upstream held back was read: %q, %v", line, err)
				}
				close(release)
				return
			}
			if err != nil || line != `{"line":1}`+"\n" {
				t.Fatalf("first line before the upstream finished: %q, %v\n%s", line, err, p.Logs())
			}
			close(release)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			rest, err := io.ReadAll(body)
			if err != nil || string(rest) != `{"line":2}`+"\n" {
				t.Fatalf("rest: %q, %v", rest, err)
			}
		})
	}
}

// With TLS the proxy speaks HTTP/2 to a client that trusts its certificate, and publishes the
// certificate's key hash and PEM file for browsers.
func TestTLSSpeaksHTTP2(t *testing.T) {
	up := newUpstream(t, nil)
	p := Start(t, Options{Upstreams: []string{up.addr()}, TLS: true})
	if !strings.HasPrefix(p.URL(), "https://") {
		t.Fatalf("URL %s", p.URL())
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: p.CertPool()},
		ForceAttemptHTTP2: true,
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(p.URL() + "/rpc")
	if err != nil {
		t.Fatalf("GET: %v\n%s", err, p.Logs())
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
		t.Fatalf("got %s %s, want HTTP/2 200", resp.Proto, resp.Status)
	}
	if resp := get(t, p, "/rpc"); resp.ProtoMajor != 2 {
		t.Fatalf("Proxy.Client spoke %s", resp.Proto)
	}

	peer := resp.TLS.PeerCertificates[0]
	sum := sha256.Sum256(peer.RawSubjectPublicKeyInfo)
	if got := base64.StdEncoding.EncodeToString(sum[:]); p.SPKIHash() != got {
		t.Fatalf("SPKIHash %s, the served certificate's %s", p.SPKIHash(), got)
	}
	data, err := os.ReadFile(p.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || !p.Certificate().Equal(peer) {
		t.Fatalf("CertFile %s does not hold the served certificate", p.CertFile())
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		t.Fatal(err)
	}
	// An untrusting client is refused: the pool is what makes it work.
	if _, err := http.Get(p.URL() + "/rpc"); err == nil {
		t.Fatal("a client without the proxy's pool trusted its certificate")
	}
}

// A replica that is gone costs its share of requests nothing: they go to the next one.
func TestNextUpstreamAfterAReplicaIsGone(t *testing.T) {
	up := newUpstream(t, nil)
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()
	p := Start(t, Options{Upstreams: []string{goneAddr, up.addr()}})

	for i := range 6 {
		resp, err := p.Client().Post(p.URL()+"/rpc", "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s\n%s", i, resp.Status, p.Logs())
		}
	}
	if n := len(up.requests()); n != 6 {
		t.Fatalf("the live replica saw %d requests, want 6", n)
	}
	// Round robin did send some to the dead replica first.
	if !strings.Contains(p.Logs(), "connect() failed") || !strings.Contains(p.Logs(), goneAddr) {
		t.Fatalf("nginx never tried %s:\n%s", goneAddr, p.Logs())
	}
}

// The replica sees the client's address in X-Forwarded-For, the Host the client asked for and the
// request's body.
func TestForwardedHeadersAndBody(t *testing.T) {
	up := newUpstream(t, nil)
	p := Start(t, Options{Upstreams: []string{up.addr()}})
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1}`))
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("the replica saw %d requests", len(seen))
	}
	r := seen[0]
	if got := r.Header.Get("X-Forwarded-For"); got != "203.0.113.7, 127.0.0.1" {
		t.Fatalf("X-Forwarded-For %q", got)
	}
	if r.Host != p.Addr() {
		t.Fatalf("Host %q, want %q", r.Host, p.Addr())
	}
	if got := r.Header.Get("X-Forwarded-Proto"); got != "http" {
		t.Fatalf("X-Forwarded-Proto %q", got)
	}
	up.mu.Lock()
	body := up.body[0]
	up.mu.Unlock()
	if body != `{"jsonrpc":"2.0","id":1}` {
		t.Fatalf("body %q", body)
	}
}

// When the test ends nginx and its workers are gone and the port no longer answers.
func TestStoppedWithTheTest(t *testing.T) {
	up := newUpstream(t, nil)
	var p *Proxy
	t.Run("proxy", func(t *testing.T) {
		p = Start(t, Options{Upstreams: []string{up.addr()}})
		get(t, p, "/")
	})
	if err := syscall.Kill(-p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("nginx's process group %d still has processes (%v)", p.cmd.Process.Pid, err)
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still answers", p.Addr())
	}
}

// Buffering is nginx's proxy_buffering, which the streaming test alone cannot tell apart.
func TestConfigBuffering(t *testing.T) {
	for _, on := range []bool{true, false} {
		o := Options{Upstreams: []string{"127.0.0.1:2"}, Buffering: on}
		conf, err := config("nginx", "127.0.0.1:1", t.TempDir(), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "proxy_buffering on;", false: "proxy_buffering off;"}[on]
		if !strings.Contains(string(conf), want) {
			t.Fatalf("Buffering %v: no %q in\n%s", on, want, conf)
		}
	}
	if _, err := config("nginx", "127.0.0.1:1", t.TempDir(), Options{Upstreams: []string{"x; y"}}, nil); err == nil {
		t.Fatal("an upstream that is not host:port was written into the config")
	}
}

// outcome records a Fatal or a Skip instead of acting on them.
type outcome struct {
	testing.TB
	fatal, skip string
}

func (o *outcome) Helper() {}

func (o *outcome) Fatal(args ...any) { o.fatal = fmt.Sprint(args...); runtime.Goexit() }

func (o *outcome) Skip(args ...any) { o.skip = fmt.Sprint(args...); runtime.Goexit() }

// Without nginx the tests skip, and with CI=true they fail, naming the package to install.
func TestMissingNginx(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := debianPath
	debianPath = "/nonexistent/nginx"
	t.Cleanup(func() { debianPath = old })
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		o := &outcome{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			binary(o)
		}()
		<-done
		got := map[string]string{"true": o.fatal, "": o.skip}[ci]
		if !strings.Contains(got, "apt-get install nginx") || o.fatal != "" && o.skip != "" {
			t.Fatalf("CI=%q: fatal %q, skip %q", ci, o.fatal, o.skip)
		}
	}
}

// Proxy.Client serves a browser-like mix on one TLS proxy: HTTP/2 requests, and wss:// handshakes
// that it sends over HTTP/1.1 connections of their own.
func TestPassCarriesWebSocketsOverTLS(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	})
	p := Start(t, Options{Upstreams: []string{up.addr()}, WebSocket: Pass, TLS: true})
	if resp := get(t, p, "/"); resp.ProtoMajor != 2 {
		t.Fatalf("GET spoke %s", resp.Proto)
	}
	c, resp, err := dialWebSocket(t, p)
	if err != nil {
		t.Fatalf("wss through a passing TLS proxy: %v\n%s", err, p.Logs())
	}
	c.CloseNow()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake %s", resp.Status)
	}
}
