package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/heaptest"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/tracker"
)

// stalledListing is a REST request whose client reads nothing of the answer: its socket
// receives into a 4 KiB buffer, and the test only peeks at the answer's status line.
type stalledListing struct {
	c *net.TCPConn
}

// stallListing sends GET path as token's subject over a socket it never reads.
func stallListing(t *testing.T, env *gatewaytest.Env, path, token string) *stalledListing {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(env.BaseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\n\r\n", path, token)
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	return &stalledListing{c: c.(*net.TCPConn)}
}

// status peeks at the answer's status code without taking any of it: 0 before it arrives.
func (s *stalledListing) status(t *testing.T) int {
	t.Helper()
	rc, err := s.c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 12)
	var n int
	if err := rc.Read(func(fd uintptr) bool {
		n, _, _ = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n < 12 || !bytes.HasPrefix(buf, []byte("HTTP/1.1 ")) {
		return 0
	}
	var code int
	_, _ = fmt.Sscanf(string(buf[9:12]), "%d", &code)
	return code
}

// createBigItems creates n items of the longest description in project.
func createBigItems(t *testing.T, env *gatewaytest.Env, project string, n int) {
	t.Helper()
	desc := strings.Repeat("😀", tracker.DefaultMaxDescriptionBytes/4)
	bob := tracker.Actor{Kind: tracker.ActorHuman, Subject: "bob"}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				in := tracker.ItemInput{Title: fmt.Sprint("item ", i), Description: desc}
				if _, err := env.Tracker.CreateItem(context.Background(), bob, project, in); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// listAll loads every page of project's items as token's subject, following next: the
// number of items and of pages.
func listAll(t *testing.T, env *gatewaytest.Env, project, token string) (items, pages int) {
	t.Helper()
	path := "/api/v1/projects/" + project + "/items?limit=500"
	for {
		code, _, body := restGet(t, env, path, token)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var page struct {
			Items []json.RawMessage `json:"items"`
			Next  *string           `json:"next"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		items, pages = items+len(page.Items), pages+1
		if page.Next == nil {
			return items, pages
		}
		path = "/api/v1/projects/" + project + "/items?limit=500&after=" + *page.Next
	}
}

// TestRESTListingFlood: one subject's listings of 500 items of 64 KiB, over sockets whose
// clients read nothing, are answered two at a time (BALLET_REST_LISTINGS_PER_SUBJECT) and
// refused 429 beyond, with Retry-After, a problem naming the limit and its counter; the two
// answered hold a page of at most BALLET_REST_PAGE_BYTES each, so that the live heap grows by
// about two pages rather than two listings of 6.5 MB. Another subject meanwhile loads every
// item, a page at a time; once the replica answers BALLET_REST_MAX_LISTINGS (3), one more of
// anyone's is 429 too.
func TestRESTListingFlood(t *testing.T) {
	const perSubject, replica, pageBytes, flood = 2, 3, 1 << 20, 6
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Tracker: true,
		RESTListings: httpapi.ListingOptions{PerSubject: perSubject, Replica: replica, PageBytes: pageBytes},
		// Long enough that the stalled answers are still held while the heap is measured.
		Config: gateway.Config{RESTWriteStall: 5 * time.Minute}, RESTTimeout: 5 * time.Minute})
	env.Project(t, "WEB", "mallory", "member", "bob", "member", "carol", "member")
	const items = 100 // 6.5 MB of descriptions
	createBigItems(t, env, "WEB", items)
	mallory := env.Token(t, "mallory")

	base := heaptest.LiveHeap()
	var stalled []*stalledListing
	for range flood {
		stalled = append(stalled, stallListing(t, env, "/api/v1/projects/WEB/items?limit=500", mallory))
	}
	codes := map[int]int{}
	eventually(t, "every stalled listing is answered or refused", func() bool {
		clear(codes)
		for _, s := range stalled {
			codes[s.status(t)]++
		}
		return codes[0] == 0
	})
	if codes[200] != perSubject || codes[429] != flood-perSubject {
		t.Fatalf("stalled listings answered %v; want %d 200 and %d 429", codes, perSubject, flood-perSubject)
	}
	growth := heaptest.LiveHeap() - base
	if n := metricValue(t, env.Server, "ballet_gateway_rest_listings"); n != perSubject {
		t.Fatalf("ballet_gateway_rest_listings = %v after the heap was measured; want %d held", n, perSubject)
	}
	t.Logf("%d stalled listings of %d items of 64 KiB: %v answered; the live heap grew by %.1f MiB", flood, items, codes, float64(growth)/(1<<20))
	if bound := int64(perSubject*pageBytes + 4<<20); growth > bound {
		t.Errorf("the live heap grew by %.1f MiB while %d listings stalled; want at most %.1f MiB (%d pages of %d bytes and 4 MiB)",
			float64(growth)/(1<<20), perSubject, float64(bound)/(1<<20), perSubject, pageBytes)
	}
	if n := limitRejections(t, env.Server, httpapi.LimitListings); n != flood-perSubject {
		t.Fatalf("limit_rejections_total{limit=rest_listings} = %v; want %d", n, flood-perSubject)
	}

	// A refusal over HTTP: Retry-After and the problem.
	code, h, body := restGet(t, env, "/api/v1/projects/WEB/items", mallory)
	if code != http.StatusTooManyRequests {
		t.Fatalf("mallory's listing beside her stalled ones: %d %s", code, body)
	}
	checkListingProblem(t, h, body, httpapi.LimitListings, perSubject)

	// Bob loads every item meanwhile, a page of at most pageBytes at a time.
	bob := env.Token(t, "bob")
	if n, pages := listAll(t, env, "WEB", bob); n != items || pages < items*(64<<10)/pageBytes {
		t.Fatalf("bob listed %d items in %d pages; want %d in at least %d", n, pages, items, items*(64<<10)/pageBytes)
	}

	// Carol's stalled listing fills the replica's listings: bob's next one is refused.
	carol := stallListing(t, env, "/api/v1/projects/WEB/items?limit=500", env.Token(t, "carol"))
	eventually(t, "carol's listing is answered", func() bool { return carol.status(t) == 200 })
	code, h, body = restGet(t, env, "/api/v1/projects/WEB/items", bob)
	if code != http.StatusTooManyRequests {
		t.Fatalf("bob's listing with the replica's listings held: %d %s", code, body)
	}
	checkListingProblem(t, h, body, httpapi.LimitReplicaListings, replica)
	if n := limitRejections(t, env.Server, httpapi.LimitReplicaListings); n != 1 {
		t.Fatalf("limit_rejections_total{limit=rest_listings_replica} = %v; want 1", n)
	}
}

// checkListingProblem checks a 429 of a bound of listings in flight.
func checkListingProblem(t *testing.T, h http.Header, body []byte, limit string, max int) {
	t.Helper()
	if h.Get("Retry-After") != "1" || h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("Retry-After %q, Content-Type %q", h.Get("Retry-After"), h.Get("Content-Type"))
	}
	var p struct {
		Type, Title, Detail, Limit string
		Status, Max                int
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Type != "about:blank" || p.Status != 429 ||
		p.Detail == "" || p.Limit != limit || p.Max != max {
		t.Errorf("problem %s (%v)", body, err)
	}
}

// TestRESTListingStall: an answer whose client takes nothing of it for BALLET_REST_WRITE_STALL
// is cut off and its connection closed, long before BALLET_REST_TIMEOUT, so that its page and
// its place among the listings in flight are let go.
func TestRESTListingStall(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Tracker: true,
		RESTListings: httpapi.ListingOptions{PageBytes: 1 << 20},
		Config:       gateway.Config{RESTWriteStall: 500 * time.Millisecond}, RESTTimeout: 10 * time.Minute})
	env.Project(t, "WEB", "mallory", "member", "bob", "member")
	createBigItems(t, env, "WEB", 24) // a page of 1 MiB: more than the sockets' buffers take
	s := stallListing(t, env, "/api/v1/projects/WEB/items?limit=500", env.Token(t, "mallory"))
	eventually(t, "the stalled listing is answered", func() bool { return s.status(t) == 200 })
	eventually(t, "the stalled answer is cut off", func() bool {
		return metricValue(t, env.Server, "ballet_gateway_rest_listings") == 0
	})
	// The client reads now: the answer ends before its last chunk, the connection closed.
	_ = s.c.SetReadDeadline(time.Now().Add(time.Minute))
	got, err := io.ReadAll(s.c)
	if err != nil && !isReset(err) {
		t.Fatalf("reading the cut-off answer: %v", err)
	}
	if bytes.HasSuffix(got, []byte("\r\n0\r\n\r\n")) {
		t.Fatalf("the stalled answer was written whole (%d bytes)", len(got))
	}
}

func isReset(err error) bool {
	var errno syscall.Errno
	for e := err; e != nil; {
		if en, ok := e.(syscall.Errno); ok {
			errno = en
			break
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return errno == syscall.ECONNRESET
}
