package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain fails the run when goroutines of this package or of HTTP connections
// outlive the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := waitForLeaks(30 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func waitForLeaks(limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		leaked := leakedGoroutines()
		if leaked == "" || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leakedGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "provider.leakedGoroutines") || strings.Contains(g, "testing.(*M).Run") {
			continue
		}
		if strings.Contains(g, "planner/provider.") || strings.Contains(g, "net/http.") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}

// recorded is one request a fake API received.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// fakeAPI is a loopback HTTP server that answers the n-th request with steps[n]
// (the last step repeats) and records every request.
type fakeAPI struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []recorded
	steps []http.HandlerFunc
}

func newFakeAPI(t *testing.T, steps ...http.HandlerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{steps: steps}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		f.mu.Unlock()
		f.steps[min(n, len(f.steps)-1)](w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// sse answers 200 text/event-stream with frames, flushing after each.
func sse(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		for _, f := range frames {
			io.WriteString(w, f)
			w.(http.Flusher).Flush()
		}
	}
}

// sseThenHang writes frames, then holds the response open until the client goes away.
func sseThenHang(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sse(frames...)(w, r)
		<-r.Context().Done()
	}
}

// status answers with an error status, headers (name, value pairs) and a JSON body.
func status(code int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// sleepRecorder is an Options.Sleep that records delays instead of waiting.
type sleepRecorder struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepRecorder) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

// collect runs one Stream and gathers its deltas.
func collect(ctx context.Context, p Provider, req *Request) ([]Delta, *Response, error) {
	var deltas []Delta
	resp, err := p.Stream(ctx, req, func(d Delta) error {
		deltas = append(deltas, d)
		return nil
	})
	return deltas, resp, err
}

func textOfDeltas(ds []Delta) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Type == DeltaText {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func userText(s string) Message {
	return Message{Role: RoleUser, Content: []Block{{Type: BlockText, Text: s}}}
}
