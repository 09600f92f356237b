package auth_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
)

const audience = "ballet-gateway"

// TestMain fails the package when goroutines outlive the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func leakedGoroutines() string {
	var leaked []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n")[1:] { // [0] is this goroutine
			if strings.Contains(g, "testing.(*M).") || strings.Contains(g, "os/signal.") ||
				strings.Contains(g, "testing.runFuzzing") || strings.Contains(g, "testing/internal/testdeps") {
				continue
			}
			leaked = append(leaked, g)
		}
		if len(leaked) == 0 {
			return ""
		}
	}
	return strings.Join(leaked, "\n\n")
}

// fakeClock is a settable clock shared by an issuer and a verifier.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Now().Truncate(time.Second)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testIssuer is an Issuer on a loopback server that counts the requests it
// answers.
type testIssuer struct {
	*auth.Issuer
	srv         *httptest.Server
	discoveries atomic.Int64
	keyFetches  atomic.Int64
	// keysDelay (ns) holds each key set answer back; keysAtOnce and keysMostAtOnce count
	// the key set requests being answered, now and at most.
	keysDelay      atomic.Int64
	keysAtOnce     atomic.Int64
	keysMostAtOnce atomic.Int64
}

// startIssuer serves a new Issuer at "/dev/oidc" on a loopback server.
func startIssuer(t testing.TB, opts *auth.IssuerOptions) *testIssuer {
	t.Helper()
	ti := &testIssuer{}
	var iss atomic.Pointer[auth.Issuer]
	ti.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, auth.DiscoveryPath):
			ti.discoveries.Add(1)
		case strings.HasSuffix(r.URL.Path, auth.JWKSPath):
			ti.keyFetches.Add(1)
			n := ti.keysAtOnce.Add(1)
			defer ti.keysAtOnce.Add(-1)
			for m := ti.keysMostAtOnce.Load(); n > m && !ti.keysMostAtOnce.CompareAndSwap(m, n); m = ti.keysMostAtOnce.Load() {
			}
			if d := time.Duration(ti.keysDelay.Load()); d > 0 {
				// The set as it was when asked, answered late.
				rec := httptest.NewRecorder()
				iss.Load().ServeHTTP(rec, r)
				time.Sleep(d)
				maps.Copy(w.Header(), rec.Header())
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
		}
		iss.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(ti.srv.Close)
	i, err := auth.NewIssuer(ti.srv.URL+"/dev/oidc", opts)
	if err != nil {
		t.Fatal(err)
	}
	iss.Store(i)
	ti.Issuer = i
	return ti
}

func (ti *testIssuer) mint(t testing.TB, subject string, o auth.TokenOptions) string {
	t.Helper()
	if o.Audience == nil {
		o.Audience = []string{audience}
	}
	tok, err := ti.Mint(subject, o)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
