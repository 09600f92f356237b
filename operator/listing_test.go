package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/operator/operatortest"
	"github.com/ballet/gateway/streams/memlog"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// blockingSource lists n connections of "s", once release is closed; entered says a listing
// is inside.
type blockingSource struct {
	n       int
	entered chan struct{}
	release chan struct{}
}

func newBlockingSource(n int) *blockingSource {
	return &blockingSource{n: n, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blockingSource) Connections(subject string, limit int) ([]operator.Connection, bool) {
	b.entered <- struct{}{}
	<-b.release
	return connections(min(b.n, limit), "s"), b.n > limit
}

// connections are n connections of subject, the oldest first.
func connections(n int, subject string) []operator.Connection {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := make([]operator.Connection, n)
	for i := range out {
		out[i] = operator.Connection{ID: fmt.Sprintf("%016x", i), Subject: subject, Codec: "json",
			ConnectedAt: at.Add(time.Duration(i) * time.Second), ExpiresAt: at.Add(time.Hour)}
	}
	return out
}

// TestLocalListingsBound: past MaxListings listings in progress one more is refused with a
// Busy error (ErrBusy), answered 429 naming the limit with a Retry-After, and counted as
// refused; once one ends, the next is served.
func TestLocalListingsBound(t *testing.T) {
	src := newBlockingSource(3)
	var seen operatortest.Outcomes
	l := operator.NewLocal("r1", src, &operator.ListOptions{MaxListings: 2, Observe: seen.Observe})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.List(context.Background(), "", 10); err != nil {
				t.Error(err)
			}
		}()
		<-src.entered
	}
	_, err := l.List(context.Background(), "", 10)
	var busy *fault.Error
	if !errors.Is(err, operator.ErrBusy) || !errors.As(err, &busy) || busy.Max != 2 {
		t.Fatalf("a third listing: %v, want a Busy error of 2", err)
	}

	iss := authtest.NewIssuer(t)
	h := operator.NewHandler(memlog.New(), authtest.NewVerifier(t, iss, "ballet"),
		operator.Options{Admins: []string{"root"}, Connections: l}, nil)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/v1/admin/connections", nil)
	r.Header.Set("Authorization", "Bearer "+authtest.Mint(t, iss, "root", auth.TokenOptions{Audience: []string{"ballet"}}))
	h.ServeHTTP(w, r)
	var p struct {
		Status int
		Limit  string
		Max    int
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusTooManyRequests || p.Limit != "listings" ||
		p.Max != 2 || w.Header().Get("Retry-After") != "2" || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a listing past the bound: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if n := seen.Get(operator.ListingRefused); n != 2 {
		t.Fatalf("refused %d, want 2", n)
	}

	close(src.release)
	wg.Wait()
	got, err := l.List(context.Background(), "", 2)
	if err != nil || len(got.Connections) != 2 || !got.Truncated || got.Connections[0].Replica != "r1" ||
		len(got.Replicas) != 1 || !got.Replicas[0].Answered {
		t.Fatalf("after the others ended: %+v, %v", got, err)
	}
	if n := seen.Get(operator.ListingAnswered); n != 3 {
		t.Fatalf("answered %d, want 3", n)
	}
}

// TestFit: a listing keeps the first connections in order up to its limit and MaxListBytes,
// and says it left the others out.
func TestFit(t *testing.T) {
	conns := append(connections(3, "zed"), connections(2, "amy")...)
	kept, cut := operator.Fit(conns, 3)
	if len(kept) != 3 || !cut || kept[0].Subject != "amy" || kept[1].Subject != "amy" || kept[2].Subject != "zed" ||
		!kept[0].ConnectedAt.Before(kept[1].ConnectedAt) {
		t.Fatalf("Fit(5, 3): %+v, cut %v", kept, cut)
	}
	if kept, cut := operator.Fit(connections(3, "amy"), 3); len(kept) != 3 || cut {
		t.Fatalf("Fit(3, 3): %d, cut %v", len(kept), cut)
	}
	big := connections(operator.MaxListLimit, strings.Repeat("s", 255))
	for i := range big {
		big[i].ClientID, big[i].RemoteAddr = strings.Repeat("c", 255), "[2001:db8::1]:65535"
	}
	kept, cut = operator.Fit(big, operator.MaxListLimit)
	b, _ := json.Marshal(kept)
	if !cut || len(kept) == 0 || len(b) > operator.MaxListBytes {
		t.Fatalf("Fit of large connections: %d kept in %d bytes, cut %v; want at most %d bytes", len(kept), len(b), cut, operator.MaxListBytes)
	}
}
