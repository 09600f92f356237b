package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// kit adapts the retry and failure scenarios to one HTTP provider's wire format.
type kit struct {
	name      string
	key       string
	hello     []string // a complete "Hello world" answer
	head      []string // the start of an answer up to its first text delta "Hello"
	overload  string   // an in-stream overload error
	errorBody func(typ, msg string) string
	newFor    func(t *testing.T, f *fakeAPI, retries int, sleep SleepFunc) Provider
	newAt     func(t *testing.T, baseURL string, client *http.Client, retries int, sleep SleepFunc) Provider
}

var kits = []kit{
	{
		name:      "anthropic",
		key:       anthropicKey,
		hello:     aHelloStream(),
		head:      []string{aMessageStart, aTextStart(0), aTextDelta(0, "Hello")},
		overload:  aOverloaded,
		errorBody: aErrorBody,
		newFor: func(t *testing.T, f *fakeAPI, retries int, sleep SleepFunc) Provider {
			return newTestAnthropic(t, f, &AnthropicOptions{MaxRetries: retries, Sleep: sleep})
		},
		newAt: func(t *testing.T, base string, c *http.Client, retries int, sleep SleepFunc) Provider {
			a, err := NewAnthropic(&AnthropicOptions{BaseURL: base, APIKey: anthropicKey, HTTPClient: c, MaxRetries: retries, Sleep: sleep})
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
	},
	{
		name:      "openai",
		key:       openaiKey,
		hello:     oHelloStream(),
		head:      []string{oRole, oContent("Hello")},
		overload:  "data: {\"error\":{\"message\":\"The server is overloaded\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n",
		errorBody: oErrorBody,
		newFor: func(t *testing.T, f *fakeAPI, retries int, sleep SleepFunc) Provider {
			return newTestOpenAI(t, f, &OpenAIOptions{APIKey: openaiKey, MaxRetries: retries, Sleep: sleep})
		},
		newAt: func(t *testing.T, base string, c *http.Client, retries int, sleep SleepFunc) Provider {
			p, err := NewOpenAI(&OpenAIOptions{BaseURL: base + "/v1", APIKey: openaiKey, HTTPClient: c, MaxRetries: retries, Sleep: sleep})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
	},
}

func forEachKit(t *testing.T, fn func(t *testing.T, k kit)) {
	for _, k := range kits {
		t.Run(k.name, func(t *testing.T) { fn(t, k) })
	}
}

func hi() *Request { return &Request{Messages: []Message{userText("hi")}} }

func checkNoKey(t *testing.T, k kit, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), k.key) {
		t.Fatalf("error leaks the key: %v", err)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name     string
		headers  []string
		min, max time.Duration
	}{
		{"seconds", []string{"retry-after", "3"}, 3 * time.Second, 3 * time.Second},
		{"milliseconds win", []string{"retry-after-ms", "1500", "retry-after", "2"}, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"http date", []string{"retry-after", date}, 25 * time.Second, 31 * time.Second},
	}
	forEachKit(t, func(t *testing.T, k kit) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFakeAPI(t, status(429, k.errorBody("rate_limit_error", "slow down"), tt.headers...), sse(k.hello...))
				rec := &sleepRecorder{}
				deltas, resp, err := collect(context.Background(), k.newFor(t, f, 0, rec.sleep), hi())
				if err != nil {
					t.Fatal(err)
				}
				if textOfDeltas(deltas) != "Hello world" || resp.StopReason != StopEndTurn {
					t.Fatalf("deltas %+v", deltas)
				}
				got := rec.got()
				if len(got) != 1 || got[0] < tt.min || got[0] > tt.max {
					t.Fatalf("slept %v, want one delay in [%v, %v]", got, tt.min, tt.max)
				}
				if n := len(f.requests()); n != 2 {
					t.Fatalf("%d requests", n)
				}
			})
		}
	})
}

func TestRetryAfterTooLongGivesUp(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, status(429, k.errorBody("rate_limit_error", "slow down"), "retry-after", "3600"), sse(k.hello...))
		rec := &sleepRecorder{}
		_, _, err := collect(context.Background(), k.newFor(t, f, 0, rec.sleep), hi())
		var pe *Error
		if !errors.As(err, &pe) || pe.Status != 429 || !pe.Retryable || pe.RetryAfter != time.Hour {
			t.Fatalf("err = %#v", err)
		}
		if len(rec.got()) != 0 || len(f.requests()) != 1 {
			t.Fatalf("slept %v after %d requests", rec.got(), len(f.requests()))
		}
	})
}

func TestAnthropicOverloaded529Retried(t *testing.T) {
	f := newFakeAPI(t, status(529, aErrorBody("overloaded_error", "Overloaded")), sse(aHelloStream()...))
	rec := &sleepRecorder{}
	deltas, _, err := collect(context.Background(), newTestAnthropic(t, f, &AnthropicOptions{Sleep: rec.sleep}), hi())
	if err != nil || textOfDeltas(deltas) != "Hello world" {
		t.Fatalf("%v %+v", err, deltas)
	}
	if got := rec.got(); len(got) != 1 || got[0] < 0 || got[0] > retryBase {
		t.Fatalf("slept %v, want one jittered delay within %v", got, retryBase)
	}
}

func TestServerErrorsGiveUpAfterMaxRetries(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, status(500, k.errorBody("api_error", "Internal server error")))
		rec := &sleepRecorder{}
		_, _, err := collect(context.Background(), k.newFor(t, f, 3, rec.sleep), hi())
		var pe *Error
		if !errors.As(err, &pe) || pe.Status != 500 || !pe.Retryable || pe.Provider != k.name || pe.Message != "Internal server error" {
			t.Fatalf("err = %#v", err)
		}
		if n := len(f.requests()); n != 4 {
			t.Fatalf("%d requests, want 1 + 3 retries", n)
		}
		got := rec.got()
		if len(got) != 3 {
			t.Fatalf("slept %v", got)
		}
		for i, d := range got {
			if ceiling := retryBase << i; d < 0 || d > ceiling {
				t.Errorf("delay %d = %v, want within [0, %v]", i, d, ceiling)
			}
		}
		checkNoKey(t, k, err)
	})
}

func TestRetryHookHearsEachRetry(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, status(500, k.errorBody("api_error", "boom")), status(429, k.errorBody("rate_limit_error", "slow"), "retry-after", "2"), sse(k.hello...))
		rec := &sleepRecorder{}
		var heard []Retry
		ctx := WithRetryHook(context.Background(), func(r Retry) { heard = append(heard, r) })
		if _, _, err := collect(ctx, k.newFor(t, f, 0, rec.sleep), hi()); err != nil {
			t.Fatal(err)
		}
		slept := rec.got()
		if len(heard) != 2 || len(slept) != 2 {
			t.Fatalf("heard %+v, slept %v", heard, slept)
		}
		for i, want := range []string{KindServer, KindRateLimited} {
			if r := heard[i]; r.Attempt != i+1 || r.Delay != slept[i] || ErrorKind(r.Err) != want {
				t.Errorf("retry %d: %+v, want attempt %d after a %s error, delay %v", i, r, i+1, want, slept[i])
			}
		}
		if heard[1].Delay != 2*time.Second {
			t.Errorf("the second retry waits %v, want the server's 2s", heard[1].Delay)
		}
	})
}

func TestInStreamErrorBeforeDeltasRetried(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, sse(k.head[0], k.overload), sse(k.hello...))
		rec := &sleepRecorder{}
		deltas, _, err := collect(context.Background(), k.newFor(t, f, 0, rec.sleep), hi())
		if err != nil || textOfDeltas(deltas) != "Hello world" || len(f.requests()) != 2 {
			t.Fatalf("%v %+v after %d requests", err, deltas, len(f.requests()))
		}
	})
}

func TestInStreamErrorAfterDeltasNotRetried(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, sse(append(k.head, k.overload)...), sse(k.hello...))
		rec := &sleepRecorder{}
		deltas, resp, err := collect(context.Background(), k.newFor(t, f, 0, rec.sleep), hi())
		var pe *Error
		if !errors.As(err, &pe) || pe.Retryable || resp != nil {
			t.Fatalf("err = %#v", err)
		}
		if textOfDeltas(deltas) != "Hello" || len(f.requests()) != 1 || len(rec.got()) != 0 {
			t.Fatalf("deltas %+v, %d requests", deltas, len(f.requests()))
		}
	})
}

func TestConnectionDroppedAfterDeltasNotRetried(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		drop := func(w http.ResponseWriter, r *http.Request) {
			sse(k.head...)(w, r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}
		f := newFakeAPI(t, drop, sse(k.hello...))
		deltas, _, err := collect(context.Background(), k.newFor(t, f, 0, nil), hi())
		if err == nil || textOfDeltas(deltas) != "Hello" || len(f.requests()) != 1 {
			t.Fatalf("err %v deltas %+v requests %d", err, deltas, len(f.requests()))
		}
		if IsRetryable(err) {
			t.Fatalf("a failure after deltas is not retryable: %v", err)
		}
	})
}

func TestConnectionRefusedRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close()
	forEachKit(t, func(t *testing.T, k kit) {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		rec := &sleepRecorder{}
		_, _, err := collect(context.Background(), k.newAt(t, base, &http.Client{Transport: tr}, 2, rec.sleep), hi())
		var pe *Error
		if !errors.As(err, &pe) || !pe.Retryable || pe.Status != 0 || pe.Type != "connection_error" {
			t.Fatalf("err = %#v", err)
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Errorf("cause not kept: %v", err)
		}
		if len(rec.got()) != 2 {
			t.Fatalf("slept %v, want 2 retries", rec.got())
		}
		checkNoKey(t, k, err)
	})
}

func TestCancelMidStream(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, sseThenHang(k.head...))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var n int
		_, err := k.newFor(t, f, 0, nil).Stream(ctx, hi(), func(d Delta) error {
			n++
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || n != 1 {
			t.Fatalf("err = %v after %d deltas", err, n)
		}
		if len(f.requests()) != 1 {
			t.Fatalf("%d requests", len(f.requests()))
		}
	})
}

func TestCancelDuringBackoff(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, status(503, k.errorBody("api_error", "unavailable"), "retry-after", "50"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sleep := func(ctx context.Context, d time.Duration) error {
			cancel()
			return sleepCtx(ctx, d)
		}
		_, _, err := collect(ctx, k.newFor(t, f, 0, sleep), hi())
		if !errors.Is(err, context.Canceled) || len(f.requests()) != 1 {
			t.Fatalf("err = %v after %d requests", err, len(f.requests()))
		}
	})
}

func TestCallbackErrorAborts(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, sseThenHang(k.head...))
		stop := errors.New("watcher gone")
		_, err := k.newFor(t, f, 0, nil).Stream(context.Background(), hi(), func(Delta) error { return stop })
		if err != stop || len(f.requests()) != 1 {
			t.Fatalf("err = %v after %d requests", err, len(f.requests()))
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		headers []string
		want    time.Duration
	}{
		{nil, 0},
		{[]string{"Retry-After", "7"}, 7 * time.Second},
		{[]string{"Retry-After", "0.5"}, 500 * time.Millisecond},
		{[]string{"Retry-After-Ms", "250"}, 250 * time.Millisecond},
		{[]string{"Retry-After-Ms", "junk", "Retry-After", "2"}, 2 * time.Second},
		{[]string{"Retry-After", now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{[]string{"Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{[]string{"Retry-After", "-3"}, 0},
		{[]string{"Retry-After", "NaN"}, 0},
		{[]string{"Retry-After", "1e300"}, 24 * time.Hour},
		{[]string{"Retry-After", "soon"}, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for i := 0; i < len(tt.headers); i += 2 {
			h.Set(tt.headers[i], tt.headers[i+1])
		}
		if got := parseRetryAfter(h, now); got != tt.want {
			t.Errorf("%v: got %v, want %v", tt.headers, got, tt.want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	for attempt := range 10 {
		ceiling := min(retryMax, retryBase<<min(attempt, 5))
		for range 200 {
			if d := backoff(attempt, 0); d < 0 || d > ceiling {
				t.Fatalf("attempt %d: %v beyond %v", attempt, d, ceiling)
			}
		}
	}
	if d := backoff(0, 4*time.Second); d != 4*time.Second {
		t.Fatalf("retry-after not honoured: %v", d)
	}
}

func TestNilCallback(t *testing.T) {
	forEachKit(t, func(t *testing.T, k kit) {
		f := newFakeAPI(t, sse(k.hello...))
		resp, err := k.newFor(t, f, 0, nil).Stream(context.Background(), hi(), nil)
		if err != nil || resp.Content[0].Text != "Hello world" {
			t.Fatalf("%v %+v", err, resp)
		}
	})
	resp, err := NewScripted(nil).Stream(context.Background(), &Request{Messages: []Message{userText("list")}}, nil)
	if err != nil || resp.StopReason != StopToolUse {
		t.Fatalf("%v %+v", err, resp)
	}
}
