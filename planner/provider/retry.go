package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retry policy. A request is retried only before any delta was delivered.
const (
	DefaultMaxRetries = 3
	retryBase         = 500 * time.Millisecond
	retryMax          = 8 * time.Second
	// maxRetryAfter is the longest server-requested delay that is waited out; a longer
	// one ends the call with the server's error rather than holding a turn for minutes.
	maxRetryAfter = 60 * time.Second
	// maxErrorBody bounds how much of an error response is read.
	maxErrorBody = 64 << 10
)

// SleepFunc waits for d or until ctx is done, returning ctx's error in that case.
type SleepFunc func(ctx context.Context, d time.Duration) error

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// httpCore is the transport shared by the HTTP providers: one POST per attempt,
// error classification, retries with backoff, and key redaction.
type httpCore struct {
	name       string
	client     *http.Client
	apiKey     string
	maxRetries int
	sleep      SleepFunc
}

func newHTTPCore(name string, client *http.Client, apiKey string, maxRetries int, sleep SleepFunc) httpCore {
	if client == nil {
		client = &http.Client{}
	}
	switch {
	case maxRetries == 0:
		maxRetries = DefaultMaxRetries
	case maxRetries < 0:
		maxRetries = 0
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	return httpCore{name: name, client: client, apiKey: apiKey, maxRetries: maxRetries, sleep: sleep}
}

// call describes one provider request.
type call struct {
	url    string
	header http.Header
	body   []byte
	// decode consumes a 2xx event stream.
	decode func(body io.Reader, emit func(Delta) error) (*Response, error)
	// errorInfo extracts the error type and message from an error response body.
	errorInfo func(body []byte) (typ, msg string)
}

// run performs c with retries and returns the response or a classified error.
func (h *httpCore) run(ctx context.Context, c *call, onDelta func(Delta) error) (*Response, error) {
	if onDelta == nil {
		onDelta = noDeltas
	}
	for attempt := 0; ; attempt++ {
		var delivered bool
		var cbErr error
		emit := func(d Delta) error {
			delivered = true
			if err := onDelta(d); err != nil {
				cbErr = err
				return err
			}
			return nil
		}
		resp, err := h.once(ctx, c, emit)
		if err == nil {
			return resp, nil
		}
		if cbErr != nil {
			return nil, cbErr
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", h.name, ctx.Err())
		}
		err = h.redact(err)
		var pe *Error
		if delivered || attempt >= h.maxRetries || !errors.As(err, &pe) || !pe.Retryable ||
			pe.RetryAfter > maxRetryAfter {
			return nil, err
		}
		delay := backoff(attempt, pe.RetryAfter)
		if hook := retryHook(ctx); hook != nil {
			hook(Retry{Attempt: attempt + 1, Err: err, Delay: delay})
		}
		if serr := h.sleep(ctx, delay); serr != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", h.name, ctx.Err())
			}
			return nil, serr
		}
	}
}

// once performs one attempt.
func (h *httpCore) once(ctx context.Context, c *call, emit func(Delta) error) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return nil, fmt.Errorf("%s: build request: %w", h.name, err)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Provider: h.name, Type: "connection_error", Message: err.Error(), Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		typ, msg := c.errorInfo(data)
		if msg == "" {
			msg = strings.TrimSpace(string(data))
			if msg == "" || !isPlainText(msg) {
				msg = http.StatusText(resp.StatusCode)
			}
			if len(msg) > 512 {
				msg = msg[:512] + "…"
			}
		}
		return nil, &Error{
			Provider:   h.name,
			Status:     resp.StatusCode,
			Type:       typ,
			Message:    msg,
			Retryable:  resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
			RetryAfter: parseRetryAfter(resp.Header, time.Now()),
		}
	}
	var delivered bool
	out, err := c.decode(resp.Body, func(d Delta) error {
		delivered = true
		return emit(d)
	})
	if err == nil {
		return out, nil
	}
	var pe *Error
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, ErrMalformed), errors.As(err, &pe):
		return nil, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%s: %w", h.name, malformed("stream cut off: %v", err))
	default:
		// A read failure of the body (reset connection) or the callback's error.
		return nil, &Error{Provider: h.name, Type: "connection_error", Message: err.Error(), Retryable: !delivered, Err: err}
	}
}

// redact removes the API key from every message err carries.
func (h *httpCore) redact(err error) error {
	if h.apiKey == "" {
		return err
	}
	var pe *Error
	if errors.As(err, &pe) {
		pe.Message = strings.ReplaceAll(pe.Message, h.apiKey, "[redacted]")
	}
	if strings.Contains(err.Error(), h.apiKey) {
		return redactedError{err: err, key: h.apiKey}
	}
	return err
}

type redactedError struct {
	err error
	key string
}

func (e redactedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.key, "[redacted]") }
func (e redactedError) Unwrap() error { return e.err }

// backoff returns the delay before retry number attempt+1: the server's retry-after
// when given, else full jitter over min(retryMax, retryBase·2^attempt).
func backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	ceiling := retryMax
	if attempt < 5 {
		ceiling = min(retryMax, retryBase<<attempt)
	}
	return rand.N(ceiling + 1)
}

// parseRetryAfter reads retry-after-ms (milliseconds) or retry-after (seconds or an
// HTTP date). It returns 0 when neither is usable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if d, ok := parseDelay(v, time.Millisecond); ok {
			return d
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if d, ok := parseDelay(v, time.Second); ok {
		return d
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func parseDelay(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	if f*float64(unit) > float64(24*time.Hour) {
		return 24 * time.Hour, true
	}
	return time.Duration(f * float64(unit)), true
}

func isPlainText(s string) bool {
	return !strings.HasPrefix(s, "<") && !strings.ContainsRune(s, 0)
}
