package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway/gatewaytest"
)

// restGet is GET path on env's client port with token ("" for none): its status, Retry-After
// and body.
func restGet(t *testing.T, env *gatewaytest.Env, path, token string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", env.BaseURL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := env.HTTP.Client().Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// TestRESTRateFlood: one subject's flood of REST requests over real HTTP is served up to its
// burst and rate (BALLET_REST_RATE) and refused 429 beyond, with Retry-After and a problem
// naming the limit, each refusal counted; another subject's requests pass meanwhile, and
// requests without a token are refused 401 and not counted.
func TestRESTRateFlood(t *testing.T) {
	for _, rate := range []int{5, 20} {
		t.Run(strconv.Itoa(rate), func(t *testing.T) {
			env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, RESTRate: rate})
			env.Project(t, "WEB", "alice", "member", "bob", "member")
			alice, bob := env.Token(t, "alice"), env.Token(t, "bob")
			const workers, each = 8, 40
			var mu sync.Mutex
			ok, refused := 0, 0
			var wg sync.WaitGroup
			start := time.Now()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						code, h, body := restGet(t, env, "/api/v1/projects/WEB/items", alice)
						mu.Lock()
						switch code {
						case http.StatusOK:
							ok++
						case http.StatusTooManyRequests:
							refused++
							checkRateProblem(t, h, body, rate)
						default:
							t.Errorf("alice's flood: %d %s", code, body)
						}
						mu.Unlock()
					}
				}()
			}
			// Bob's requests pass while alice floods.
			for i := range 2 * rate {
				if code, _, body := restGet(t, env, "/api/v1/projects/WEB", bob); code != http.StatusOK {
					t.Fatalf("bob's request %d during the flood: %d %s", i, code, body)
				}
			}
			wg.Wait()
			elapsed := time.Since(start)
			// The burst, and what the rate refilled meanwhile (one more for the rounding).
			if most := 2*rate + int(elapsed.Seconds()*float64(rate)) + 1; ok < 2*rate || ok > most {
				t.Fatalf("%d of alice's %d requests served in %v; want %d to %d", ok, workers*each, elapsed, 2*rate, most)
			}
			if refused == 0 {
				t.Fatal("none of alice's flood was refused")
			}
			if n := limitRejections(t, env.Server, "rest_requests"); n != float64(refused) {
				t.Fatalf("limit_rejections_total{limit=rest_requests} = %v; %d refused", n, refused)
			}
			// Without a token: 401, before any budget, and not counted.
			for range 3 * rate {
				if code, _, _ := restGet(t, env, "/api/v1/projects/WEB", ""); code != http.StatusUnauthorized {
					t.Fatalf("without a token: %d, want 401", code)
				}
			}
			if n := limitRejections(t, env.Server, "rest_requests"); n != float64(refused) {
				t.Fatalf("requests without a token counted: %v, want %d", n, refused)
			}
			// After Retry-After, alice is served again.
			code, h, _ := restGet(t, env, "/api/v1/projects/WEB", alice)
			if code == http.StatusTooManyRequests {
				secs, _ := strconv.Atoi(h.Get("Retry-After"))
				time.Sleep(time.Duration(secs) * time.Second)
				code, _, _ = restGet(t, env, "/api/v1/projects/WEB", alice)
			}
			if code != http.StatusOK {
				t.Fatalf("alice after Retry-After: %d", code)
			}
		})
	}
}

// checkRateProblem checks a 429 of the subject's REST rate: Retry-After in whole seconds, at
// least 1, and an RFC 7807 body naming the limit and the rate.
func checkRateProblem(t *testing.T, h http.Header, body []byte, rate int) {
	t.Helper()
	if secs, err := strconv.Atoi(h.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("Retry-After %q, want whole seconds, at least 1", h.Get("Retry-After"))
	}
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	var p struct {
		Type, Title, Detail, Limit string
		Status, Max                int
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Type != "about:blank" || p.Title != "Too Many Requests" ||
		p.Status != 429 || p.Detail == "" || p.Limit != "rest_requests" || p.Max != rate {
		t.Errorf("problem %s (%v)", body, err)
	}
}
