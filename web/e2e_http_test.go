package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/internal/nginxtest"
	"github.com/ballet/gateway/streams/pgtest"
)

// httpAudience is the replicas' BALLET_OIDC_AUDIENCE in the HTTP browser test.
const httpAudience = "ballet"

// TestBrowserBoardOverHTTP drives the board in headless Chromium through a real nginx that
// refuses WebSocket upgrades and speaks HTTP/2 over TLS, in front of two `serve` replicas on
// one database: the client falls back to POST /rpc by itself, the board stays live, a planner
// answer streams, a replica killed mid-stream is survived with no gap, and one page holds 12
// streaming POSTs live at once over HTTP/2 (logging how many it holds over HTTP/1.1, through
// a second nginx without TLS).
func TestBrowserBoardOverHTTP(t *testing.T) {
	node := nodeModules(t, "playwright-core", "@msgpack/msgpack")
	chromium := chromiumPath()
	_, err := os.Stat(chromium)
	need(t, err == nil, "chromium ("+chromium+")", "apt-get install -y chromium")

	bin := buildGateway(t)
	iss := authtest.NewIssuer(t)
	env := []string{
		"BALLET_DATABASE_URL=" + pgtest.URL(t), "BALLET_OIDC_ISSUER=" + iss.URL(), "BALLET_OIDC_AUDIENCE=" + httpAudience,
		"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0", "BALLET_DRAIN_WINDOW=1s",
		"BALLET_PLANNER_PROVIDER=scripted", "BALLET_PLANNER_SCRIPT=" + plannerScript(t),
		// Every POST spends its address's budget, and every request here comes from loopback.
		"BALLET_ADDR_RATE=1000", "BALLET_REST_RATE=1000",
	}
	for _, args := range [][]string{
		{"migrate"}, {"admin", "project-create", "DEMO", "Demo project"}, {"admin", "grant", "DEMO", "dev-user", "admin"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ballet-gateway %v: %v\n%s", args, err, out)
		}
	}
	var fronts []*front
	var upstreams []string
	for range 2 {
		f := newFront(t, startReplica(t, bin, env), iss)
		fronts = append(fronts, f)
		upstreams = append(upstreams, f.srv.Listener.Addr().String())
	}
	h2 := nginxtest.Start(t, nginxtest.Options{Upstreams: upstreams, WebSocket: nginxtest.Refuse, TLS: true})
	h1 := nginxtest.Start(t, nginxtest.Options{Upstreams: upstreams, WebSocket: nginxtest.Refuse})
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/kill" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, killBusiest(fronts))
	}))
	t.Cleanup(control.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/http.e2e.mjs")
	cmd.Env = append(os.Environ(),
		"BOARD_URL="+h2.URL(), "H1_URL="+h1.URL(), "SPKI="+h2.SPKIHash(), "NODE_EXTRA_CA_CERTS="+h2.CertFile(),
		"CONTROL_URL="+control.URL, "CHROMIUM="+chromium, "STORY="+strings.Join(story, ""),
	)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		var logs strings.Builder
		for i, f := range fronts {
			fmt.Fprintf(&logs, "replica %d:\n%s\n", i, f.r.output())
		}
		t.Fatalf("board e2e over HTTP: %v\n%s\n%snginx:\n%s", err, out, logs.String(), h2.Logs())
	}
	t.Logf("board e2e over HTTP:\n%s", out)
}

// buildGateway builds ballet-gateway (with -race when the tests run with it) and returns its path.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ballet-gateway")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/ballet-gateway")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ballet-gateway: %v\n%s", err, out)
	}
	return bin
}

var listeningRE = regexp.MustCompile(`"msg":"listening","addr":"([0-9.:]+)"`)

// startReplica runs `ballet-gateway serve` with env and waits until it listens.
func startReplica(t *testing.T, bin string, env []string) *gateway {
	t.Helper()
	return runGateway(t, exec.Command(bin, "serve"), env, listeningRE)
}

// front is what `ballet-gateway dev` serves beside the API, in front of one replica: the board
// and the token mint (GET /dev/token, of the test's issuer); /rpc and /api/ go to the replica.
// It counts the POST /rpc responses open through it.
type front struct {
	r    *gateway
	srv  *httptest.Server
	open atomic.Int64
	dead atomic.Bool
}

func newFront(t *testing.T, r *gateway, iss *auth.Issuer) *front {
	t.Helper()
	f := &front{r: r}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: r.addr})
	proxy.ErrorHandler = func(w http.ResponseWriter, req *http.Request, err error) {
		if !errors.Is(err, context.Canceled) && !f.dead.Load() {
			t.Logf("front %s %s: %v", req.Method, req.URL.Path, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	mux := http.NewServeMux()
	mux.Handle("/", Handler())
	mux.Handle("/api/", proxy)
	mux.HandleFunc("/rpc", func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			f.open.Add(1)
			defer f.open.Add(-1)
		}
		proxy.ServeHTTP(w, req)
	})
	mux.HandleFunc("GET /dev/token", func(w http.ResponseWriter, req *http.Request) {
		subject := req.URL.Query().Get("subject")
		ttl := 12 * time.Hour
		if v := req.URL.Query().Get("ttl"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				http.Error(w, "ttl: want a duration", http.StatusBadRequest)
				return
			}
			ttl = d
		}
		tok, err := iss.Mint(subject, auth.TokenOptions{Audience: []string{httpAudience}, TTL: ttl})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "subject": subject, "expires_at": time.Now().Add(ttl).Unix()})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// killBusiest kills the replica with the most POST /rpc responses open, as a crash would
// (SIGKILL: its responses are cut), and takes its front down with it, so that nginx sends
// what follows to the other. It says which and how many were open.
func killBusiest(fronts []*front) string {
	var f *front
	for _, c := range fronts {
		if !c.dead.Load() && (f == nil || c.open.Load() > f.open.Load()) {
			f = c
		}
	}
	if f == nil {
		return "none alive"
	}
	open := f.open.Load()
	f.dead.Store(true)
	f.r.kill()
	f.srv.CloseClientConnections()
	f.srv.Listener.Close()
	return fmt.Sprintf("killed replica %s with %d responses open", f.r.addr, open)
}

// kill ends the gateway at once (SIGKILL).
func (g *gateway) kill() {
	_ = g.proc.Kill()
}
