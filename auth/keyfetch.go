package auth

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// maxKeySetBytes bounds a key set response kept in memory.
const maxKeySetBytes = 1 << 20

// pacedTransport is the transport of the key set client. go-oidc refetches
// the key set for every token whose signature the cached keys do not verify;
// this transport lets at most one request per interval reach the issuer and
// answers the others with the last good response (or the last failure).
type pacedTransport struct {
	next     http.RoundTripper
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex // held across a fetch: fetches are serial anyway
	last    time.Time  // start of the last fetch that reached the network
	good    *cachedResponse
	lastErr error
}

type cachedResponse struct {
	status int
	header http.Header
	body   []byte
}

var _ http.RoundTripper = (*pacedTransport)(nil)

func newPacedTransport(next http.RoundTripper, interval time.Duration, now func() time.Time) *pacedTransport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &pacedTransport{next: next, interval: interval, now: now}
}

func (t *pacedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.interval > 0 && !t.last.IsZero() && t.now().Sub(t.last) < t.interval {
		if t.good != nil {
			return t.good.response(req), nil
		}
		return nil, fmt.Errorf("auth: key set fetch failed less than %v ago: %w", t.interval, t.lastErr)
	}
	t.last = t.now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.lastErr = err
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		t.lastErr = fmt.Errorf("key set: %s", resp.Status)
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	resp.Body.Close()
	if err == nil && len(body) > maxKeySetBytes {
		err = fmt.Errorf("key set larger than %d bytes", maxKeySetBytes)
	}
	if err != nil {
		t.lastErr = fmt.Errorf("read key set: %w", err)
		return nil, t.lastErr
	}
	t.good = &cachedResponse{status: resp.StatusCode, header: resp.Header.Clone(), body: body}
	t.lastErr = nil
	return t.good.response(req), nil
}

func (c *cachedResponse) response(req *http.Request) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)),
		StatusCode:    c.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        c.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: int64(len(c.body)),
		Request:       req,
	}
}
